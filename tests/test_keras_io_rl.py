"""keras-io's DDPG (rl/ddpg_pendulum.py) as a Keras user ports it (``import pyggml as
keras``; the Pendulum environment replaced by a small offline system of the same shapes):
its actor and critic models, the Ornstein-Uhlenbeck noise, the replay buffer's update with two
GradientTapes and two Adam optimizers, the policy's ``.numpy()`` on a model's output, and the
soft target update through ``get_weights()[i]`` and ``set_weights``."""

import numpy as np

import pyggml as keras
from pyggml import layers

num_states, num_actions, upper_bound, lower_bound = 3, 1, 2.0, -2.0
gamma, tau = 0.99, 0.005


class OUActionNoise:
    def __init__(self, mean, std_deviation, theta=0.15, dt=1e-2, x_initial=None):
        self.theta = theta
        self.mean = mean
        self.std_dev = std_deviation
        self.dt = dt
        self.x_initial = x_initial
        self.reset()

    def __call__(self):
        x = (self.x_prev + self.theta * (self.mean - self.x_prev) * self.dt
             + self.std_dev * np.sqrt(self.dt) * np.random.normal(size=self.mean.shape))
        self.x_prev = x
        return x

    def reset(self):
        self.x_prev = self.x_initial if self.x_initial is not None else np.zeros_like(self.mean)


class Buffer:
    def __init__(self, nets, buffer_capacity=1000, batch_size=16):
        self.nets = nets
        self.buffer_capacity = buffer_capacity
        self.batch_size = batch_size
        self.buffer_counter = 0
        self.state_buffer = np.zeros((self.buffer_capacity, num_states))
        self.action_buffer = np.zeros((self.buffer_capacity, num_actions))
        self.reward_buffer = np.zeros((self.buffer_capacity, 1))
        self.next_state_buffer = np.zeros((self.buffer_capacity, num_states))

    def record(self, obs_tuple):
        index = self.buffer_counter % self.buffer_capacity
        self.state_buffer[index] = obs_tuple[0]
        self.action_buffer[index] = obs_tuple[1]
        self.reward_buffer[index] = obs_tuple[2]
        self.next_state_buffer[index] = obs_tuple[3]
        self.buffer_counter += 1

    def update(self, state_batch, action_batch, reward_batch, next_state_batch):
        actor_model, critic_model, target_actor, target_critic, actor_optimizer, critic_optimizer = self.nets
        with keras.GradientTape() as tape:
            target_actions = target_actor(next_state_batch, training=True)
            y = reward_batch + gamma * target_critic([next_state_batch, target_actions], training=True)
            critic_value = critic_model([state_batch, action_batch], training=True)
            critic_loss = keras.ops.mean(keras.ops.square(y - critic_value))
        critic_grad = tape.gradient(critic_loss, critic_model.trainable_variables)
        critic_optimizer.apply_gradients(zip(critic_grad, critic_model.trainable_variables))
        with keras.GradientTape() as tape:
            actions = actor_model(state_batch, training=True)
            critic_value = critic_model([state_batch, actions], training=True)
            actor_loss = -keras.ops.mean(critic_value)
        actor_grad = tape.gradient(actor_loss, actor_model.trainable_variables)
        actor_optimizer.apply_gradients(zip(actor_grad, actor_model.trainable_variables))

    def learn(self):
        record_range = min(self.buffer_counter, self.buffer_capacity)
        batch_indices = np.random.choice(record_range, self.batch_size)
        state_batch = keras.ops.convert_to_tensor(self.state_buffer[batch_indices])
        action_batch = keras.ops.convert_to_tensor(self.action_buffer[batch_indices])
        reward_batch = keras.ops.convert_to_tensor(self.reward_buffer[batch_indices])
        reward_batch = keras.ops.cast(reward_batch, dtype="float32")
        next_state_batch = keras.ops.convert_to_tensor(self.next_state_buffer[batch_indices])
        self.update(state_batch, action_batch, reward_batch, next_state_batch)


def update_target(target, original, tau):
    target_weights = target.get_weights()
    original_weights = original.get_weights()
    for i in range(len(target_weights)):
        target_weights[i] = original_weights[i] * tau + target_weights[i] * (1 - tau)
    target.set_weights(target_weights)


def get_actor():
    last_init = keras.initializers.RandomUniform(minval=-0.003, maxval=0.003)
    inputs = layers.Input(shape=(num_states,))
    out = layers.Dense(64, activation="relu")(inputs)
    out = layers.Dense(64, activation="relu")(out)
    outputs = layers.Dense(1, activation="tanh", kernel_initializer=last_init)(out)
    outputs = outputs * upper_bound
    return keras.Model(inputs, outputs)


def get_critic():
    state_input = layers.Input(shape=(num_states,))
    state_out = layers.Dense(16, activation="relu")(state_input)
    state_out = layers.Dense(32, activation="relu")(state_out)
    action_input = layers.Input(shape=(num_actions,))
    action_out = layers.Dense(32, activation="relu")(action_input)
    concat = layers.Concatenate()([state_out, action_out])
    out = layers.Dense(64, activation="relu")(concat)
    out = layers.Dense(64, activation="relu")(out)
    outputs = layers.Dense(1)(out)
    return keras.Model([state_input, action_input], outputs)


def policy(actor_model, state, noise_object):
    sampled_actions = keras.ops.squeeze(actor_model(state))
    noise = noise_object()
    sampled_actions = sampled_actions.numpy() + noise
    legal_action = np.clip(sampled_actions, lower_bound, upper_bound)
    return [np.squeeze(legal_action)]


def test_ddpg_learns_its_critic_and_moves_its_targets_softly():
    np.random.seed(0)
    keras.utils.set_random_seed(0)
    actor_model, critic_model = get_actor(), get_critic()
    target_actor, target_critic = get_actor(), get_critic()
    target_actor.set_weights(actor_model.get_weights())
    target_critic.set_weights(critic_model.get_weights())
    assert all(np.array_equal(target_actor.get_weights()[i], actor_model.get_weights()[i]) for i in range(6))
    nets = (actor_model, critic_model, target_actor, target_critic,
            keras.optimizers.Adam(0.001), keras.optimizers.Adam(0.002))
    buffer = Buffer(nets, 1000, 16)
    ou_noise = OUActionNoise(mean=np.zeros(1), std_deviation=float(0.2) * np.ones(1))
    rng = np.random.default_rng(0)
    # a small offline system: the reward is -(state . state) - 0.1 action^2
    states = rng.normal(size=(64, num_states))
    for s in states:
        action = policy(actor_model, keras.ops.expand_dims(keras.ops.convert_to_tensor(s), 0), ou_noise)
        assert np.shape(action) == (1,) and lower_bound <= float(action[0]) <= upper_bound
        buffer.record((s, action, -float(s @ s) - 0.1 * float(action[0]) ** 2, rng.normal(size=num_states)))

    def critic_error():
        q = critic_model.predict([buffer.state_buffer[:64], buffer.action_buffer[:64]], verbose=0)
        return float(np.mean((q - buffer.reward_buffer[:64]) ** 2))

    before_error, before_target = critic_error(), target_critic.get_weights()
    critic_now = critic_model.get_weights()
    buffer.learn()
    update_target(target_actor, actor_model, tau)
    update_target(target_critic, critic_model, tau)
    moved = critic_model.get_weights()
    assert not np.array_equal(moved[0], critic_now[0])                     # the critic trained
    got = target_critic.get_weights()
    for i in range(len(got)):                                               # the soft update, exactly
        np.testing.assert_allclose(got[i], moved[i] * tau + before_target[i] * (1 - tau), rtol=1e-6, atol=1e-7)
    for _ in range(60):
        buffer.learn()
        update_target(target_actor, actor_model, tau)
        update_target(target_critic, critic_model, tau)
    after_error = critic_error()
    assert after_error < 0.5 * before_error


def test_a_model_s_and_a_layer_s_outputs_on_arrays_answer_numpy():
    inp = keras.Input((3,))
    model = keras.Model(inp, [layers.Dense(2)(inp), layers.Dense(1)(inp)])
    x = np.ones((4, 3), np.float32)
    a, b = model(x)
    assert type(a.numpy()) is np.ndarray and a.numpy().shape == (4, 2) and b.numpy().shape == (4, 1)
    np.testing.assert_array_equal(a.numpy(), model.predict(x, verbose=0)[0])
    y = layers.Dense(5)(x)
    assert type(y.numpy()) is np.ndarray and y.numpy().shape == (4, 5)
    assert keras.ops.squeeze(keras.ops.ones((1, 3))).numpy().shape == (3,)
