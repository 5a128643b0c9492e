"""Keras's ``RemoteMonitor``: each epoch's logs POSTed to a server (urllib)."""

import json
import urllib.error
import urllib.parse
import urllib.request
import warnings

import numpy as np

from pyggml.callbacks.callback import Callback

__all__ = ["RemoteMonitor"]


def _plain(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    return v


class RemoteMonitor(Callback):
    """At each epoch's end, POST ``{"epoch": epoch, **logs}`` to ``root + path``: as a JSON
    body (``send_as_json=True``, Content-Type application/json) or, as Keras does by default,
    as a form whose ``field`` holds that JSON.  ``headers`` are added to the request.  A server
    that cannot be reached gives a warning, and training goes on."""

    def __init__(self, root="http://localhost:9000", path="/publish/epoch/end/", field="data", headers=None,
                 send_as_json=False):
        super().__init__()
        for name, v in (("root", root), ("path", path), ("field", field)):
            if not isinstance(v, str):
                raise TypeError(f"RemoteMonitor: {name} must be a string, got {v!r}")
        if urllib.parse.urlsplit(root).scheme not in ("http", "https"):
            raise ValueError(f"RemoteMonitor: root must be an http or https URL, got {root!r}")
        if headers is not None and (not isinstance(headers, dict) or
                                    not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())):
            raise TypeError(f"RemoteMonitor: headers must be a dict of strings, got {headers!r}")
        self.root = root
        self.path = path
        self.field = field
        self.headers = headers
        self.send_as_json = bool(send_as_json)
        self.timeout = 10.0

    def on_epoch_end(self, epoch, logs=None):
        send = {"epoch": epoch}
        for k, v in (logs or {}).items():
            send[k] = _plain(v)
        headers = dict(self.headers or {})
        if self.send_as_json:
            body = json.dumps(send).encode("utf-8")
            headers.setdefault("Content-Type", "application/json")
        else:
            body = urllib.parse.urlencode({self.field: json.dumps(send)}).encode("utf-8")
            headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
        request = urllib.request.Request(self.root + self.path, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                response.read()
        except (urllib.error.URLError, OSError, ValueError) as e:
            warnings.warn(f"RemoteMonitor: could not reach the server at {self.root}: {e}", stacklevel=2)
