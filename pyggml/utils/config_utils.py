"""``Config``: a dict of settings read and set as attributes (Keras 3.6's keras.utils.Config),
which ``freeze()`` makes read-only."""

import json

__all__ = ["Config"]


class Config:
    """Settings as attributes and items: ``Config(seq_len=2048, seed=42)``, then ``c.seed``,
    ``c["seq_len"]``, ``c.lr = 1e-3``; ``freeze()`` refuses changes until ``unfreeze()``."""

    def __init__(self, **kwargs):
        object.__setattr__(self, "_config", dict(kwargs))
        object.__setattr__(self, "_frozen", False)

    @property
    def frozen(self):
        """Whether changes are refused."""
        return self._frozen

    def freeze(self):
        object.__setattr__(self, "_frozen", True)

    def unfreeze(self):
        object.__setattr__(self, "_frozen", False)

    def _refuse_if_frozen(self):
        if self._frozen:
            raise ValueError("this Config is frozen: call unfreeze() before changing it")

    # --- attributes ----------------------------------------------------------------------
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self._config[name]
        except KeyError:
            raise AttributeError(f"Config has no setting {name!r}") from None

    def __setattr__(self, name, value):
        if name in ("frozen",):
            raise AttributeError("frozen is set with freeze() and unfreeze()")
        self._refuse_if_frozen()
        self._config[name] = value

    def __delattr__(self, name):
        self._refuse_if_frozen()
        try:
            del self._config[name]
        except KeyError:
            raise AttributeError(f"Config has no setting {name!r}") from None

    # --- items -----------------------------------------------------------------------------
    def __getitem__(self, key):
        return self._config[key]

    def __setitem__(self, key, value):
        self._refuse_if_frozen()
        self._config[key] = value

    def __delitem__(self, key):
        self._refuse_if_frozen()
        del self._config[key]

    def __contains__(self, key):
        return key in self._config

    def __iter__(self):
        return iter(self._config)

    def __len__(self):
        return len(self._config)

    def __eq__(self, other):
        return isinstance(other, Config) and self._config == other._config

    def __repr__(self):
        return f"<Config {self._config!r}>"

    def keys(self):
        return self._config.keys()

    def values(self):
        return self._config.values()

    def items(self):
        return self._config.items()

    def get(self, key, default=None):
        return self._config.get(key, default)

    def pop(self, key, *default):
        self._refuse_if_frozen()
        return self._config.pop(key, *default)

    def update(self, *args, **kwargs):
        self._refuse_if_frozen()
        self._config.update(*args, **kwargs)

    def as_dict(self):
        """A copy of the settings as a dict."""
        return dict(self._config)

    def to_json(self):
        return json.dumps(self._config)
