# pyggml port of keras-io's examples/rl/actor_critic_cartpole.py (an actor-critic
# agent with a shared hidden layer, learning CartPole-v0 one episode at a time).
#
# Data: the original makes its environment with gym.make("CartPole-v0").  This
# port uses offline_data.CartPoleEnv, the same dynamics and rules with gym's old
# interface (seed, reset, step -> state, reward, done, info), because gym is not
# among this project's dependencies.  --quick (CI; or KERAS_IO_QUICK=1) stops
# after --episodes (default 250) episodes if not solved before.
# The port's own lines are the flags (offline_data.parse_flags: --quick, --seed,
# --threads, --episodes), keras.utils.set_random_seed(SEED), and the quick run's
# episode budget (marked "ours").
#
# Workarounds (marked "workaround" below): the original records its losses under
# tf.GradientTape and differentiates them; pyggml builds static ggml graphs, so
# the same two losses are compiled once (categorical cross-entropy whose target is
# the advantage times the one-hot action, which is -log_prob * diff; Huber for the
# critic) and `model.gradients(states, targets)` differentiates them for the
# episode's states, then `optimizer.apply_gradients` steps as in the original.
# The compiled losses are means over the episode's steps where the original sums
# them (Adam's step does not depend on that scale), and the advantage is a
# constant, where the original's tape also lets the actor loss reach the critic
# through `diff`.
#
#     python examples/keras_io/actor_critic_cartpole.py          # until solved
#     python examples/keras_io/actor_critic_cartpole.py --quick

import sys

import numpy as np
import pyggml as keras
from pyggml import layers

import offline_data

EPISODES = 250
if "--episodes" in sys.argv:  # ours: the quick run's budget
    i = sys.argv.index("--episodes")
    EPISODES = int(sys.argv[i + 1])
    del sys.argv[i:i + 2]
QUICK, SEED = offline_data.parse_flags("Actor critic on CartPole (keras-io) on pyggml")
keras.utils.set_random_seed(SEED)

# Configuration parameters for the whole setup
seed = 42
gamma = 0.99  # Discount factor for past rewards
max_steps_per_episode = 10000
env = offline_data.CartPoleEnv()  # Create the environment (gym.make("CartPole-v0") there)
env.seed(seed)
eps = np.finfo(np.float32).eps.item()  # Smallest number such that 1.0 + eps != 1.0

num_inputs = 4
num_actions = 2
num_hidden = 128

inputs = layers.Input(shape=(num_inputs,))
common = layers.Dense(num_hidden, activation="relu")(inputs)
action = layers.Dense(num_actions, activation="softmax")(common)
critic = layers.Dense(1)(common)

model = keras.Model(inputs=inputs, outputs=[action, critic])

optimizer = keras.optimizers.Adam(learning_rate=0.01)
huber_loss = keras.losses.Huber()
model.compile(optimizer=optimizer, loss=["categorical_crossentropy", huber_loss])  # workaround
action_probs_history = []
critic_value_history = []
rewards_history = []
states_history, actions_history = [], []  # workaround: what the compiled losses need
running_reward = 0
episode_count = 0

while True:  # Run until solved
    state = env.reset()
    episode_reward = 0
    if True:  # with tf.GradientTape() as tape:
        for timestep in range(1, max_steps_per_episode):
            # env.render(); Adding this line would show the attempts
            # of the agent in a pop up window.

            state = np.expand_dims(state, 0)  # tf.convert_to_tensor, tf.expand_dims there

            # Predict action probabilities and estimated future rewards
            # from environment state
            action_probs, critic_value = model(state)
            critic_value_history.append(critic_value[0, 0])

            # Sample action from action probability distribution
            action = np.random.choice(num_actions, p=np.squeeze(action_probs))
            action_probs_history.append(np.log(action_probs[0, action]))
            states_history.append(state[0])  # workaround
            actions_history.append(action)  # workaround

            # Apply the sampled action in our environment
            state, reward, done, _ = env.step(action)
            rewards_history.append(reward)
            episode_reward += reward

            if done:
                break

        # Update running reward to check condition for solving
        running_reward = 0.05 * episode_reward + (1 - 0.05) * running_reward

        # Calculate expected value from rewards
        # - At each timestep what was the total reward received after that timestep
        # - Rewards in the past are discounted by multiplying them with gamma
        # - These are the labels for our critic
        returns = []
        discounted_sum = 0
        for r in rewards_history[::-1]:
            discounted_sum = r + gamma * discounted_sum
            returns.insert(0, discounted_sum)

        # Normalize
        returns = np.array(returns)
        returns = (returns - np.mean(returns)) / (np.std(returns) + eps)
        returns = returns.tolist()

        # workaround: the losses' targets (actor: diff * one_hot(action); critic: ret)
        diff = np.array(returns) - np.array(critic_value_history)
        actor_targets = keras.utils.to_categorical(actions_history, num_actions) * diff[:, None]
        grads = model.gradients(np.array(states_history), [actor_targets, np.array(returns)])
        optimizer.apply_gradients(zip(grads.values(), model.trainable_variables))

        # Clear the loss and reward history
        action_probs_history.clear()
        critic_value_history.clear()
        rewards_history.clear()
        states_history.clear()  # workaround
        actions_history.clear()  # workaround

    # Log details
    episode_count += 1
    if episode_count % 10 == 0:
        template = "running reward: {:.2f} at episode {}"
        print(template.format(running_reward, episode_count))

    if running_reward > 195:  # Condition to consider the task solved
        print("Solved at episode {}!".format(episode_count))
        break
    if QUICK and episode_count >= EPISODES:  # ours: the quick run's budget
        print("Not solved in {} episodes; running reward {:.2f}".format(episode_count, running_reward))
        break
