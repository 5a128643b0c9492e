#!/usr/bin/env python3
"""Deep Q-learning on CartPole with a pyggml Trainer.

The environment is the classic cart-pole of Barto, Sutton and Anderson (1983),
written here in numpy: a pole hinged on a cart that a force of +-10 N pushes
left or right, integrated with explicit Euler steps of 0.02 s.  An episode ends
when the cart leaves |x| <= 2.4 m or the pole tilts past 12 degrees
(terminated), or after 200 steps (truncated: CartPole-v0's cap).  Every step
earns 1, so a return is the number of steps survived, at most 200.  The task
counts as solved when the mean return over 100 consecutive episodes reaches
195.

The agent is a double DQN: an online Q-network (4 -> 64 -> 64 -> 2) trained by
a ``pg.Trainer`` on batches from a replay buffer, and a target network kept as
a ``pg.Snapshot`` that ``Trainer.update_target`` moves towards the online
weights (soft updates with ``--tau``, or ``--tau 1`` with ``--target-every N``
for hard copies).  The loss is mean squared error on the action taken only: the
trainer is built with ``loss_mask=2`` and each row's weights are the one-hot of
its action, so the other output cell contributes nothing.  Adam's learning
rate is annealed linearly from 1e-3 to 1e-4 over the first 30k training steps
(``Trainer.set_lr``), which keeps the policy from collapsing once it is good.
Truncation at the step cap is not a terminal state: its value is bootstrapped.

    python examples/dqn_cartpole.py              # trains until solved (or --episodes)
    python examples/dqn_cartpole.py --quick      # a short run for CI
"""

import argparse
import math
import sys
import time

import numpy as np

# --- the environment ----------------------------------------------------------------


class CartPole:
    """Cart-pole dynamics (frictionless), Euler-integrated; state (x, x_dot, theta, theta_dot)."""

    GRAVITY = 9.8              # m/s^2
    CART_MASS = 1.0            # kg
    POLE_MASS = 0.1            # kg
    HALF_POLE = 0.5            # m, pivot to the pole's centre of mass
    FORCE = 10.0               # N, the push of either action
    DT = 0.02                  # s per step
    X_LIMIT = 2.4              # m
    THETA_LIMIT = 12 * 2 * math.pi / 360   # rad
    MAX_STEPS = 200

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.state = None
        self.t = 0

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        self.t = 0
        return self.state.astype(np.float32)

    def step(self, action):
        """Apply action 0 (push left) or 1 (push right); returns (state, reward, terminated, truncated)."""
        x, x_dot, theta, theta_dot = self.state
        force = self.FORCE if action == 1 else -self.FORCE
        total = self.CART_MASS + self.POLE_MASS
        sin, cos = math.sin(theta), math.cos(theta)
        # the pole's reaction on the cart, per unit of total mass
        push = (force + self.POLE_MASS * self.HALF_POLE * theta_dot * theta_dot * sin) / total
        theta_acc = (self.GRAVITY * sin - cos * push) / (
            self.HALF_POLE * (4.0 / 3.0 - self.POLE_MASS * cos * cos / total))
        x_acc = push - self.POLE_MASS * self.HALF_POLE * theta_acc * cos / total
        # explicit Euler: positions move with the old velocities
        x, theta = x + self.DT * x_dot, theta + self.DT * theta_dot
        x_dot, theta_dot = x_dot + self.DT * x_acc, theta_dot + self.DT * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        self.t += 1
        terminated = abs(x) > self.X_LIMIT or abs(theta) > self.THETA_LIMIT
        truncated = not terminated and self.t >= self.MAX_STEPS
        return self.state.astype(np.float32), 1.0, terminated, truncated


# --- the agent, independent of the framework ---------------------------------------------

HPARAMS = dict(
    hidden=64,              # two hidden layers of this width, relu
    learning_rate=1e-3,     # Adam, from the first training step ...
    lr_end=1e-4,            # ... annealed linearly to this
    lr_decay_steps=30_000,  # over this many training steps
    gamma=0.99,
    batch_size=64,
    buffer_size=50_000,
    warmup=1_000,           # random steps before learning starts
    eps_start=1.0,
    eps_end=0.02,
    eps_decay_steps=10_000,  # linear decay of epsilon over this many env steps
    td_clip=0.0,            # >0: TD errors clipped to [-td_clip, td_clip] (Huber's gradient through mse)
    tau=0.005,              # soft target update after every training step
    target_every=1,         # training steps between target updates
    solve_window=100,
    solve_return=195.0,
)


QUICK_LEARNED = 60.0        # --quick passes when the greedy policy's mean return reaches this


class ReplayBuffer:
    """A ring of transitions in preallocated numpy arrays."""

    def __init__(self, capacity, state_dim, rng):
        self.s = np.zeros((capacity, state_dim), np.float32)
        self.s2 = np.zeros((capacity, state_dim), np.float32)
        self.a = np.zeros(capacity, np.int64)
        self.r = np.zeros(capacity, np.float32)
        self.done = np.zeros(capacity, np.float32)
        self.capacity, self.size, self.pos, self.rng = capacity, 0, 0, rng

    def add(self, s, a, r, s2, terminated):
        i = self.pos
        self.s[i], self.a[i], self.r[i], self.s2[i], self.done[i] = s, a, r, s2, float(terminated)
        self.pos = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, n):
        idx = self.rng.integers(0, self.size, n)
        return self.s[idx], self.a[idx], self.r[idx], self.s2[idx], self.done[idx]


def td_targets(q_online_s, q_online_s2, q_target_s2, a, r, done, gamma, clip=0.0):
    """Double-DQN targets for the actions taken (TD error clipped to [-clip, clip] if clip).

    Returns (targets, mask): (batch, 2) arrays; targets holds the target
    in the taken action's cell, mask is that cell's one-hot."""
    rows = np.arange(len(a))
    best = np.argmax(q_online_s2, axis=1)                 # chosen by the online network ...
    y = r + gamma * (1.0 - done) * q_target_s2[rows, best]  # ... valued by the target network
    q_taken = q_online_s[rows, a]
    if clip:
        y = q_taken + np.clip(y - q_taken, -clip, clip)
    targets = np.zeros_like(q_online_s)
    targets[rows, a] = y
    mask = np.zeros_like(q_online_s)
    mask[rows, a] = 1.0
    return targets, mask


def run_dqn(learner, hp, episodes, seed, log_every=20, out=print):
    """Train until solved or out of episodes.  learner: q(states), q_target(states),
    train(states, targets, mask), update_target(), set_lr(lr).  Returns a result dict."""
    env = CartPole(seed)
    rng = np.random.default_rng(seed + 1)
    buf = ReplayBuffer(hp["buffer_size"], 4, rng)
    returns, steps, train_steps, solved_at = [], 0, 0, None
    t0 = time.perf_counter()
    for ep in range(episodes):
        s, ret = env.reset(), 0.0
        while True:
            eps = max(hp["eps_end"], hp["eps_start"] - (hp["eps_start"] - hp["eps_end"]) * steps / hp["eps_decay_steps"])
            if rng.random() < eps:
                a = int(rng.integers(0, 2))
            else:
                a = int(np.argmax(learner.q(s[None])[0]))
            s2, r, terminated, truncated = env.step(a)
            buf.add(s, a, r, s2, terminated)   # truncation is no terminal state: bootstrap through it
            s, ret, steps = s2, ret + r, steps + 1
            if buf.size >= hp["warmup"]:
                bs, ba, br, bs2, bd = buf.sample(hp["batch_size"])
                q_s, q_s2 = np.split(learner.q(np.concatenate([bs, bs2])), 2)
                targets, mask = td_targets(q_s, q_s2, learner.q_target(bs2), ba, br, bd, hp["gamma"], hp["td_clip"])
                frac = min(1.0, train_steps / hp["lr_decay_steps"])
                learner.set_lr(hp["learning_rate"] + (hp["lr_end"] - hp["learning_rate"]) * frac)
                learner.train(bs, targets, mask)
                train_steps += 1
                if train_steps % hp["target_every"] == 0:
                    learner.update_target()
            if terminated or truncated:
                break
        returns.append(ret)
        window = returns[-hp["solve_window"]:]
        if log_every and (ep + 1) % log_every == 0:
            out(f"episode {ep + 1:4d}  return {ret:5.0f}  mean of last {len(window)}: {np.mean(window):6.1f}"
                f"  epsilon {eps:.2f}  steps {steps}")
        if solved_at is None and len(window) == hp["solve_window"] and np.mean(window) >= hp["solve_return"]:
            solved_at = ep + 1
            break
    wall = time.perf_counter() - t0
    window = returns[-hp["solve_window"]:]
    return dict(episodes=len(returns), solved_at=solved_at, mean_return=float(np.mean(window)),
                window=len(window), steps=steps, train_steps=train_steps, wall_s=wall,
                us_per_step=wall / max(steps, 1) * 1e6, returns=returns)


def greedy_returns(learner, n, seed):
    """Returns of n episodes with the greedy policy (no exploration, no learning)."""
    env = CartPole(seed)
    out = []
    for _ in range(n):
        s, ret, done = env.reset(), 0.0, False
        while not done:
            s, r, terminated, truncated = env.step(int(np.argmax(learner.q(s[None])[0])))
            ret += r
            done = terminated or truncated
        out.append(ret)
    return out


def report(name, res, out=print):
    if res["solved_at"] is not None:
        out(f"SOLVED after {res['solved_at']} episodes: mean return {res['mean_return']:.1f} over the last "
            f"{res['window']} episodes (>= {HPARAMS['solve_return']:.0f})")
    else:
        out(f"not solved in {res['episodes']} episodes: mean return {res['mean_return']:.1f} over the last "
            f"{res['window']}")
    out(f"{res['steps']} env steps, {res['train_steps']} training steps in {res['wall_s']:.1f} s")
    out(f"{res['us_per_step']:.0f} us per env step ({name}: environment, replay, forward passes, "
        f"training and target updates)")


# --- the pyggml learner ----------------------------------------------------------------


class PyggmlLearner:
    def __init__(self, hp, seed):
        import pyggml as pg
        pg.set_seed(seed)
        L = pg.layers
        h = int(hp["hidden"])
        model = pg.Sequential([L.Dense(h, activation="relu"), L.Dense(h, activation="relu"),
                               L.Dense(2)], input_shape=4)
        model.compile(optimizer=pg.optimizers.Adam(learning_rate=hp["learning_rate"]), loss="mse")
        self.model = model
        self.trainer = pg.Trainer(model, batch_size=int(hp["batch_size"]), loss_mask=2)
        self.target = self.trainer.snapshot()
        self.tau = hp["tau"]

    def q(self, states):
        return self.trainer.predict(states)

    def q_target(self, states):
        return self.target.predict(states, batch_size=len(states))

    def train(self, states, targets, mask):
        return self.trainer.step(states, targets, weights=mask)

    def update_target(self):
        self.trainer.update_target(self.target, tau=self.tau)

    def set_lr(self, lr):
        if lr != self.trainer.lr:
            self.trainer.set_lr(lr)

    def free(self):
        self.target.free()
        self.trainer.free()
        self.model.free()


def parse_args(argv=None, prog=None, description=None):
    p = argparse.ArgumentParser(prog=prog, description=description or __doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=1000, help="most training episodes (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the environment, exploration and weights")
    p.add_argument("--quick", action="store_true",
                   help="a short run for CI (120 episodes, faster exploration decay): checks that it "
                        "runs and learns something")
    p.add_argument("--tau", type=float, default=HPARAMS["tau"], help="target update rate (1: hard copy)")
    p.add_argument("--target-every", type=int, default=HPARAMS["target_every"],
                   help="training steps between target updates")
    p.add_argument("--threads", type=int, default=1,
                   help="CPU threads (default 1: the networks are far too small to share out)")
    p.add_argument("--eval-episodes", type=int, default=100, help="greedy episodes run after training")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help=f"override a hyper-parameter (repeatable): {', '.join(HPARAMS)}")
    args = p.parse_args(argv)
    hp = dict(HPARAMS, tau=args.tau, target_every=args.target_every)
    if args.quick:
        # learn sooner, explore less: enough to beat a random policy clearly, not to solve
        args.episodes = min(args.episodes, 120)
        args.eval_episodes = 10
        hp.update(warmup=500, eps_decay_steps=2_000, lr_decay_steps=5_000)
    for item in args.set:
        name, _, value = item.partition("=")
        if name not in HPARAMS:
            p.error(f"--set: unknown hyper-parameter {name!r}; known: {', '.join(HPARAMS)}")
        hp[name] = type(HPARAMS[name])(float(value)) if isinstance(HPARAMS[name], int) else float(value)
    return args, hp


def main(argv=None):
    args, hp = parse_args(argv)
    import pyggml as pg
    pg.set_n_threads(args.threads)
    print(f"pyggml {pg.__version__} on {pg.backends()[0]}, {args.threads} thread(s); CartPole with a "
          f"{CartPole.MAX_STEPS}-step cap, solved at a mean return >= {hp['solve_return']:.0f} over "
          f"{hp['solve_window']} consecutive episodes")
    learner = PyggmlLearner(hp, args.seed)
    res = run_dqn(learner, hp, args.episodes, args.seed, log_every=10 if args.quick else 20)
    report("pyggml", res)
    if args.quick:
        first, last = np.mean(res["returns"][:10]), np.mean(res["returns"][-10:])
        print(f"mean return of the first 10 episodes {first:.1f}, of the last 10 {last:.1f}")
    greedy = None
    if args.eval_episodes:
        g = greedy_returns(learner, args.eval_episodes, args.seed + 1000)
        greedy = float(np.mean(g))
        print(f"greedy policy: mean return {greedy:.1f} over {len(g)} episodes (min {min(g):.0f})")
    learner.free()
    if args.quick:
        # a random policy averages about 22, an untrained greedy one about 9
        learned = greedy is not None and greedy >= QUICK_LEARNED
        print(f"learned something (greedy mean return >= {QUICK_LEARNED:.0f}): {learned}")
        return 0 if learned else 1
    return 0 if res["solved_at"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
