#!/usr/bin/env python3
"""The DQN of examples/dqn_cartpole.py with a PyTorch learner, for comparison.

Everything but the learner comes from the example itself: the numpy
CartPole, the replay buffer, the double-DQN targets, the training loop and
the hyper-parameters (HPARAMS, and the same command-line flags).  The network
is the same 4-64-64-2 MLP with the same initialisation (Glorot-uniform
weights, zero biases, as pyggml's Dense), trained with Adam on the same masked
mean squared error (sum of the taken action's squared error over
batch x actions), and the target network is updated the same way.  It prints
the same lines, including the wall time per environment step.

    python tools/dqn_cartpole_torch.py [--episodes N] [--seed N] [--quick] [--threads N]

A benchmark, never a test.
"""

import copy
import importlib.util
import os
import sys

import numpy as np

_EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples", "dqn_cartpole.py")


def _load_example():
    spec = importlib.util.spec_from_file_location("dqn_cartpole_example", _EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class TorchLearner:
    def __init__(self, hp, seed):
        import torch
        self.torch = torch
        torch.manual_seed(seed)
        h = int(hp["hidden"])
        self.net = torch.nn.Sequential(torch.nn.Linear(4, h), torch.nn.ReLU(), torch.nn.Linear(h, h),
                                       torch.nn.ReLU(), torch.nn.Linear(h, 2))
        for m in self.net:
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.xavier_uniform_(m.weight)
                torch.nn.init.zeros_(m.bias)
        self.target = copy.deepcopy(self.net)
        for p in self.target.parameters():
            p.requires_grad_(False)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=hp["learning_rate"], betas=(0.9, 0.999), eps=1e-8)
        self.tau = hp["tau"]

    def q(self, states):
        with self.torch.no_grad():
            return self.net(self.torch.from_numpy(np.ascontiguousarray(states))).numpy()

    def q_target(self, states):
        with self.torch.no_grad():
            return self.target(self.torch.from_numpy(np.ascontiguousarray(states))).numpy()

    def train(self, states, targets, mask):
        t = self.torch
        q = self.net(t.from_numpy(states))
        # pyggml's weighted mse: sum(w * err^2) / number of elements
        loss = (t.from_numpy(mask) * (q - t.from_numpy(targets)) ** 2).sum() / q.numel()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.item()

    def update_target(self):
        with self.torch.no_grad():
            for pt, p in zip(self.target.parameters(), self.net.parameters()):
                pt.lerp_(p, self.tau)

    def set_lr(self, lr):
        for g in self.opt.param_groups:
            g["lr"] = lr

    def free(self):
        pass


def main(argv=None):
    ex = _load_example()
    args, hp = ex.parse_args(argv, prog="python tools/dqn_cartpole_torch.py",
                             description="The DQN of examples/dqn_cartpole.py with a PyTorch learner.")
    try:
        import torch
    except ImportError:
        print("this comparison needs PyTorch (pip install torch)", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    print(f"PyTorch {torch.__version__}, {args.threads} thread(s); CartPole with a "
          f"{ex.CartPole.MAX_STEPS}-step cap, solved at a mean return >= {hp['solve_return']:.0f} over "
          f"{hp['solve_window']} consecutive episodes")
    learner = TorchLearner(hp, args.seed)
    res = ex.run_dqn(learner, hp, args.episodes, args.seed, log_every=10 if args.quick else 20)
    ex.report("PyTorch", res)
    if args.eval_episodes:
        g = ex.greedy_returns(learner, args.eval_episodes, args.seed + 1000)
        print(f"greedy policy: mean return {np.mean(g):.1f} over {len(g)} episodes (min {min(g):.0f})")
    return 0 if (res["solved_at"] is not None or args.quick) else 1


if __name__ == "__main__":
    sys.exit(main())
