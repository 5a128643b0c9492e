# Remote devices through ggml's RPC backend: connections to servers, the checks
# that turn a lost connection into RPCError, and a server that Ctrl-C stops.
#
# ggml-rpc (with our patches 0050/0051) never aborts on a failed connection: it
# keeps the first failure of each connection, skips every later command on it
# (replies read as zeros) and fails graph computes.  The core asks after every
# transfer and compute that touched a remote device, so that no zero ever reaches
# the user as a result.

cdef extern from "ggml-backend.h" nogil:
    void ggml_backend_register(ggml_backend_reg_t reg)
    size_t ggml_backend_reg_dev_count(ggml_backend_reg_t reg)
    ggml_backend_dev_t ggml_backend_reg_dev_get(ggml_backend_reg_t reg, size_t index)
    ggml_backend_buffer_type_t ggml_backend_dev_buffer_type(ggml_backend_dev_t device)

from pyggml.core.ggml_rpc cimport *
from pyggml.errors import RPCError

cdef bint _rpc_used = False           # set by the first connect: until then every check costs nothing
cdef dict _rpc_connections = {}       # endpoint -> _RPCConnection (what connect() opened)
cdef set _rpc_registered = set()      # endpoints whose devices are in ggml's registry
cdef str _RPC_LOST = ("; what lived on that device (weights, optimizer state) is gone: "
                      "load the last saved model to go on")


def rpc_available():
    """True when this build has ggml's RPC backend (meson option rpc)."""
    return bool(PYGGML_HAS_RPC)


def rpc_protocol_version():
    """The version of ggml's RPC protocol this build speaks, as (major, minor, patch)."""
    return (RPC_PROTO_MAJOR_VERSION, RPC_PROTO_MINOR_VERSION, RPC_PROTO_PATCH_VERSION)


cdef int _rpc_require() except -1:
    if not PYGGML_HAS_RPC:
        raise GGMLError("this build of pyggml has no RPC backend (rebuild with "
                        "`pip install . -Csetup-args=-Drpc=enabled`)")
    return 0


# --- the checks ------------------------------------------------------------------

cdef int _rpc_check_buffer(ggml_backend_buffer_t buf) except -1:
    """RPCError when buf lives on a remote device whose connection failed."""
    if not _rpc_used or buf == NULL:
        return 0
    cdef char msg[1024]
    if ggml_backend_rpc_buffer_error(buf, msg, sizeof(msg)):
        raise RPCError((<bytes>msg).decode("utf-8", "replace") + _RPC_LOST)
    return 0


cdef int _rpc_check_tensor(const ggml_tensor * t) except -1:
    if not _rpc_used or t == NULL:
        return 0
    return _rpc_check_buffer(t.view_src.buffer if t.view_src != NULL else t.buffer)


cdef int _rpc_check_backend(ggml_backend_t b) except -1:
    if not _rpc_used or b == NULL:
        return 0
    cdef char msg[1024]
    if ggml_backend_rpc_backend_error(b, msg, sizeof(msg)):
        raise RPCError((<bytes>msg).decode("utf-8", "replace") + _RPC_LOST)
    return 0


cdef int _rpc_check_backends(list backends) except -1:
    """After a compute over these backends (a Scheduler's)."""
    if not _rpc_used:
        return 0
    for b in backends:
        _rpc_check_backend((<Backend>b).ptr)
    return 0


cdef int _rpc_check_compute(list backends, ggml_cgraph * g, ggml_status st) except -1:
    """After a compute: the backends' connections, and when the compute failed,
    the buffers its tensors live in (weights left on a connection that failed)."""
    if not _rpc_used:
        return 0
    _rpc_check_backends(backends)
    if st != GGML_STATUS_FAILED or g == NULL:
        return 0
    cdef int i, j
    cdef ggml_tensor * t
    for i in range(ggml_graph_n_nodes(g)):
        t = ggml_graph_node(g, i)
        _rpc_check_tensor(t)
        for j in range(GGML_MAX_SRC):
            _rpc_check_tensor(t.src[j])
    return 0


cdef int _rpc_check_opt(list backends, list params) except -1:
    """After an OptContext's eval (ggml-opt keeps the compute status to itself)."""
    if not _rpc_used:
        return 0
    _rpc_check_backends(backends)
    for p in params:
        _rpc_check_tensor((<Tensor>p).ptr)
    return 0


cdef int _rpc_check_device_init(ggml_backend_dev_t dev, str name) except -1:
    """ggml_backend_dev_init gave NULL: say why when dev is a remote device."""
    cdef const char * ep = ggml_backend_rpc_dev_endpoint(dev)
    cdef char msg[1024]
    if ep == NULL:
        return 0
    if ggml_backend_rpc_endpoint_error(ep, msg, sizeof(msg)):
        raise RPCError(f"device {name!r}: " + (<bytes>msg).decode("utf-8", "replace"))
    raise RPCError(f"device {name!r}: the server {(<bytes>ep).decode()} no longer serves it")


cdef bint _rpc_hidden(ggml_backend_dev_t dev, bint listing=True):
    """Whether to leave out a remote device.  ggml's registry cannot forget
    devices: pyggml lists (listing) only those of working connect()ions.  By
    name, a device stays usable while its connection is open (connect()ed, or
    held by models after disconnect()), failed or not (then it says why)."""
    if not _rpc_used:
        return False
    cdef const char * ep = ggml_backend_rpc_dev_endpoint(dev)
    if ep == NULL:
        return False
    conn = _rpc_connections.get((<bytes>ep).decode())
    if listing:
        return conn is None or (<_RPCConnection>conn)._failed()
    cdef uint64_t a, b, c, d
    return conn is None and not ggml_backend_rpc_get_stats(ep, &a, &b, &c, &d)


cdef bint _rpc_is_remote(ggml_backend_dev_t dev):
    return ggml_backend_rpc_dev_endpoint(dev) != NULL


cdef int _rpc_unknown_device(str want, list known) except -1:
    """_find_device found no device named want: explain a remote one."""
    if not want.startswith("rpc"):
        return 0
    _rpc_require()
    raise ValueError(f"no remote device {want!r}: connect to a server first, e.g. "
                     f"pyggml.rpc.connect('127.0.0.1:50052'); available: {known}")


# --- connections -------------------------------------------------------------------

cdef class _RPCConnection(_Owner):
    """Holds a connection open (a backend of the server's first device): the
    server serves this process until disconnect() or exit."""
    cdef ggml_backend_t pin
    cdef readonly str endpoint
    cdef readonly list device_names

    def __dealloc__(self):
        self._dealloc()

    cdef bint _alive(self):
        return self.pin != NULL

    cdef void _release(self) noexcept:
        with nogil:
            ggml_backend_free(self.pin)
        self.pin = NULL

    cdef void _forget(self) noexcept:
        self.pin = NULL

    cdef bint _failed(self):
        cdef char msg[8]
        return self.pin == NULL or ggml_backend_rpc_backend_error(self.pin, msg, sizeof(msg))


cdef str _check_endpoint(object endpoint):
    if not isinstance(endpoint, str):
        raise TypeError(f"endpoint must be a str 'host:port', got {type(endpoint).__name__}")
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c.isspace() for c in endpoint) \
            or ":" in host:
        raise ValueError(f"endpoint must be 'host:port' (an IPv4 address or host name, a port 1..65535), "
                         f"got {endpoint!r}")
    return f"{host}:{int(port)}"


cdef int _timeout_ms(object value, str what, bint allow_none) except? -2:
    if value is None and allow_none:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not value > 0 or value != value or value > 86400:
        raise ValueError(f"{what} must be a number of seconds in (0, 86400]"
                         + (" or None" if allow_none else "") + f", got {value!r}")
    return max(1, int(round(float(value) * 1000)))


def rpc_connect(endpoint, timeout=5.0, io_timeout=60.0):
    """Connect to the RPC server at endpoint ('host:port') and add its devices
    to the registry (``rpc0``, ``rpc1``, ... in order of connection).  Returns
    their names.  ``timeout`` bounds the TCP connect and the handshake,
    ``io_timeout`` any later wait for the server (None: no limit; a server
    that vanished is still noticed by TCP keep-alive within about 25 s).
    Connecting again to a connected server returns its devices."""
    global _rpc_used
    _rpc_require()
    ep = _check_endpoint(endpoint)
    cdef int c_ms = _timeout_ms(timeout, "timeout", False)
    cdef int io_ms = _timeout_ms(io_timeout, "io_timeout", True)
    cdef _RPCConnection old = _rpc_connections.get(ep)
    if old is not None and not old._failed() and getpid() == old._pid:
        ggml_backend_rpc_set_timeouts(ep.encode(), c_ms, io_ms)
        return list(old.device_names)
    cdef bytes bep = ep.encode()
    cdef const char * cep = bep
    cdef char msg[1024]
    cdef ggml_backend_t pin
    cdef ggml_backend_reg_t reg
    cdef ggml_backend_dev_t dev
    cdef size_t i, n
    cdef bint ok
    cdef _RPCConnection conn
    ggml_backend_rpc_set_timeouts(cep, c_ms, io_ms)
    _rpc_used = True
    with nogil:
        pin = ggml_backend_rpc_init(cep, 0)
    if pin == NULL:
        if ggml_backend_rpc_endpoint_error(cep, msg, sizeof(msg)):
            raise RPCError((<bytes>msg).decode("utf-8", "replace"))
        raise RPCError(f"the RPC server {ep} serves no device")
    conn = _RPCConnection.__new__(_RPCConnection)
    conn.pin = pin
    conn.endpoint = ep
    with nogil:
        reg = ggml_backend_rpc_add_server(cep)      # known by now: no round trip
        n = ggml_backend_reg_dev_count(reg) if reg != NULL else 0
    names = []
    for i in range(n):
        dev = ggml_backend_reg_dev_get(reg, i)
        names.append((<bytes>ggml_backend_dev_name(dev)).decode().lower())
        # the buffer type asks the server for its alignment once, and is kept for good:
        # make it while the server answers
        with nogil:
            ok = ggml_backend_dev_buffer_type(dev) != NULL
        if not ok:
            conn.free()
            _rpc_check_device_init(dev, names[-1])
            raise RPCError(f"the RPC server {ep} did not describe its device {i}")
    if ep not in _rpc_registered:
        ggml_backend_register(reg)
        _rpc_registered.add(ep)
    conn.device_names = names
    if old is not None:
        old.free()
    _rpc_connections[ep] = conn
    return list(names)


def rpc_disconnect(endpoint=None):
    """Stop holding the connection to endpoint (all servers when None): its
    devices leave backends() and the server is free for other clients once no
    model of this process uses them."""
    eps = list(_rpc_connections) if endpoint is None else [_check_endpoint(endpoint)]
    for ep in eps:
        conn = _rpc_connections.pop(ep, None)
        if conn is not None:
            conn.free()


def rpc_connections():
    """{endpoint: [device names]} of the servers connected now."""
    return {ep: list((<_RPCConnection>c).device_names) for ep, c in _rpc_connections.items()}


def rpc_stats(endpoint):
    """Counters of the live connection to endpoint since it was made: commands,
    round_trips (commands that waited for a reply), bytes_sent, bytes_received.
    None when there is no live connection."""
    ep = _check_endpoint(endpoint)
    cdef uint64_t c = 0, r = 0, s = 0, v = 0
    if not ggml_backend_rpc_get_stats(ep.encode(), &c, &r, &s, &v):
        return None
    return {"commands": int(c), "round_trips": int(r), "bytes_sent": int(s), "bytes_received": int(v)}


def rpc_error(endpoint):
    """Why the connection to endpoint failed (None while it works)."""
    ep = _check_endpoint(endpoint)
    cdef _RPCConnection conn = _rpc_connections.get(ep)
    cdef char msg[1024]
    if conn is not None and conn.pin != NULL and ggml_backend_rpc_backend_error(conn.pin, msg, sizeof(msg)):
        return (<bytes>msg).decode("utf-8", "replace")
    if ggml_backend_rpc_endpoint_error(ep.encode(), msg, sizeof(msg)):
        return (<bytes>msg).decode("utf-8", "replace")
    return None


# --- the server --------------------------------------------------------------------

def _rpc_backend_threads(Backend backend not None, int n):
    """Give a served CPU backend n threads on a persistent pool (others: nothing)."""
    backend._check()
    backend._use_threads(n)


cdef class RPCServer(_Owner):
    """A ggml RPC server listening on host:port (port 0: a free one) for the
    given backends: ``RPCServer("127.0.0.1", 50052, [Backend("cpu")])``.
    ``serve()`` blocks, serving one client at a time, until ``stop()`` (from
    another thread) or Ctrl-C (KeyboardInterrupt).  No address check here:
    pyggml.rpc.serve applies the loopback rule."""
    cdef ggml_backend_rpc_server_t ptr
    cdef int * stop_flag
    cdef readonly str host
    cdef readonly int port
    cdef readonly list backends

    def __init__(self, host, port, backends):
        _rpc_require()
        if not isinstance(host, str):
            raise TypeError("host must be a str (an IPv4 address)")
        if isinstance(port, bool) or not isinstance(port, (int, np.integer)) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an int in 0..65535, got {port!r}")
        if isinstance(backends, Backend):
            backends = [backends]
        bl = list(backends)
        if not bl or len(bl) > 16 or not all(isinstance(b, Backend) for b in bl):
            raise TypeError("backends must be a list of 1 to 16 Backend objects")
        cdef ggml_backend_t arr[16]
        for i, b in enumerate(bl):
            (<Backend>b)._check()
            if ggml_backend_is_rpc((<Backend>b).ptr):
                raise ValueError(f"{(<Backend>b).name} is itself a remote device: serve local devices only")
            arr[i] = (<Backend>b).ptr
        cdef bytes bhost = host.encode()
        cdef char msg[512]
        msg[0] = 0
        self.stop_flag = <int *>malloc(sizeof(int))
        if self.stop_flag == NULL:
            raise MemoryError()
        self.stop_flag[0] = 0
        self.ptr = ggml_backend_rpc_server_new(bhost, int(port), len(bl), arr, msg, sizeof(msg))
        if self.ptr == NULL:
            raise RPCError((<bytes>msg).decode("utf-8", "replace") or f"cannot listen on {host}:{port}")
        self.host = host
        self.port = ggml_backend_rpc_server_port(self.ptr)
        self.backends = bl
        for b in bl:
            (<Backend>b)._add_dependent(self)

    def __dealloc__(self):
        self._dealloc()
        if self.stop_flag != NULL:
            c_free(self.stop_flag)
            self.stop_flag = NULL

    cdef bint _alive(self):
        return self.ptr != NULL

    cdef void _release(self) noexcept:
        ggml_backend_rpc_server_free(self.ptr)
        self.ptr = NULL

    cdef void _forget(self) noexcept:
        self.ptr = NULL

    def free(self):
        """Stop serving (within 0.1 s, after the command in progress) and close the port."""
        if self.stop_flag != NULL:
            self.stop_flag[0] = 1
        with self._lock:          # serve() holds it while it runs
            _Owner.free(self)

    def stop(self):
        """Make serve() return (from another thread; within 0.1 s, after the command in progress)."""
        if self.stop_flag != NULL:
            self.stop_flag[0] = 1

    def serve(self):
        """Serve clients, one at a time, until stop() or Ctrl-C (then KeyboardInterrupt)."""
        self._check()
        with self._lock:
            self._check()
            self.stop_flag[0] = 0
            if threading.current_thread() is threading.main_thread():
                pyggml_sigint_arm()
                pyggml_sigint_clear()
            with nogil:
                pyggml_rpc_server_run(self.ptr, self.stop_flag)
            if pyggml_sigint_get():
                pyggml_sigint_clear()
                PyErr_CheckSignals()
                raise KeyboardInterrupt("the RPC server was interrupted")

    def __repr__(self):
        if self.ptr == NULL:
            return "<pyggml.core.RPCServer (freed)>"
        return f"<pyggml.core.RPCServer {self.host}:{self.port} {[b.name for b in self.backends]}>"
