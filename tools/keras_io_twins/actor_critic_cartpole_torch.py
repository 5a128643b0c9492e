#!/usr/bin/env python3
"""PyTorch twin of examples/keras_io/actor_critic_cartpole.py: the same CartPole
(offline_data.CartPoleEnv, seeded 42), the same network (Dense 128 relu shared; a
softmax actor over 2 actions, a linear critic), Adam lr 0.01 (eps 1e-7), gamma 0.99,
returns normalised per episode, and the port's update after each episode: the mean over
the episode's steps of -log pi(a|s) * (return - value) (the advantage held constant)
plus the mean Huber loss (delta 1) of the critic against the returns.  Solved when the
running reward (0.05 * episode + 0.95 * running) passes 195."""

import sys

import numpy as np
import torch
from torch import nn

from common import keras_init, offline_data, setup

EPISODES = 250
if "--episodes" in sys.argv:
    i = sys.argv.index("--episodes")
    EPISODES = int(sys.argv[i + 1])
    del sys.argv[i:i + 2]
QUICK, SEED = offline_data.parse_flags("Actor critic on CartPole, PyTorch twin")
setup(SEED)
gamma = 0.99
env = offline_data.CartPoleEnv()
env.seed(42)
eps = np.finfo(np.float32).eps.item()


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.common = nn.Linear(4, 128)
        self.action = nn.Linear(128, 2)
        self.critic = nn.Linear(128, 1)

    def forward(self, x):
        h = torch.relu(self.common(x))
        return torch.softmax(self.action(h), dim=-1), self.critic(h)


model = keras_init(ActorCritic())
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, eps=1e-7)
huber = nn.HuberLoss(delta=1.0)
running_reward, episode_count = 0.0, 0
while True:
    state = env.reset()
    states, actions, rewards, values = [], [], [], []
    episode_reward = 0
    for timestep in range(1, 10000):
        with torch.no_grad():
            probs, value = model(torch.from_numpy(state[None]))
        action = np.random.choice(2, p=np.squeeze(probs.numpy()).astype(np.float64) /
                                  float(probs.numpy().astype(np.float64).sum()))
        states.append(state)
        actions.append(action)
        values.append(float(value[0, 0]))
        state, reward, done, _ = env.step(action)
        rewards.append(reward)
        episode_reward += reward
        if done:
            break
    running_reward = 0.05 * episode_reward + (1 - 0.05) * running_reward
    returns, discounted = [], 0.0
    for r in rewards[::-1]:
        discounted = r + gamma * discounted
        returns.insert(0, discounted)
    returns = np.array(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    diff = torch.from_numpy((returns - np.array(values)).astype(np.float32))
    probs, value = model(torch.from_numpy(np.array(states)))
    log_p = torch.log(probs.clamp(1e-7, 1 - 1e-7)[torch.arange(len(actions)), torch.tensor(actions)])
    loss = (-log_p * diff).mean() + huber(value[:, 0], torch.from_numpy(returns.astype(np.float32)))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    episode_count += 1
    if episode_count % 10 == 0:
        print("running reward: {:.2f} at episode {}".format(running_reward, episode_count))
    if running_reward > 195:
        print("Solved at episode {}!".format(episode_count))
        break
    if QUICK and episode_count >= EPISODES:
        print("Not solved in {} episodes; running reward {:.2f}".format(episode_count, running_reward))
        break
