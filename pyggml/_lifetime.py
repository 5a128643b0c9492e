"""What every Python-level owner of native memory shares: with-statements and
release on garbage collection, both through its idempotent free()."""


class Freeable:
    def free(self):  # pragma: no cover - each owner defines it
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
        return False

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass
