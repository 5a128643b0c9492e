"""Saving never loses the user's work (issue 18, items 1 and 2).

A save that fails for any reason (file-size limit, full disk, I/O error, a
kill in the middle) raises and leaves the old file byte-for-byte intact; a
save through a symlink updates the target; the old file's mode is kept and a
new file gets the umask's; anything that is not a regular file is refused and
left alone; the data is fsync'd before the rename and the folder after.

Each case runs in its own interpreter (a file-size limit or a kill must not
touch pytest) and fails on a signal, a hang or a wrong file."""

import hashlib
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from _subproc import run_py, script

# a model whose file is about 2.5 KiB, and the four public ways to save it
MODEL = """
def model(seed=0):
    return pg.Sequential([pg.layers.Dense(16, activation="relu"), pg.layers.Dense(4)],
                         input_shape=8).compile(loss="mse", seed=seed)
X = np.random.default_rng(0).random((16, 8)).astype(np.float32)
Y = np.random.default_rng(1).random((16, 4)).astype(np.float32)

def save_via(how, m, path):
    if how == "save":
        m.save(path)
    elif how == "save_weights":
        m.save_weights(path)
    elif how == "checkpoint":
        m.fit(X, Y, epochs=1, batch_size=8, verbose=0,
              callbacks=[pg.callbacks.ModelCheckpoint(path, monitor="loss")])
    elif how == "snapshot":
        tr = pg.Trainer(m, batch_size=8)
        tr.step(X[:8], Y[:8])
        snap = tr.snapshot()
        try:
            snap.save(path)
        finally:
            snap.free()
            tr.free()
    elif how == "core":
        f = core.GGUFFile()
        f.set("general.architecture", "test")
        f.add_tensor("w", np.arange(600, dtype=np.float32))
        f.write(path)
    else:
        raise ValueError(how)

def digest(path):
    import hashlib
    return hashlib.sha256(open(path, "rb").read()).hexdigest()

def leftovers(folder):
    return [n for n in os.listdir(folder) if n.endswith(".tmp")]
"""

WAYS = ["core", "save", "save_weights", "checkpoint", "snapshot"]


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def make_good_file(tmp_path, name="m.gguf"):
    p = tmp_path / name
    run_py(MODEL, f"model(seed=7).save({str(p)!r})")
    return p


def test_good_file_is_about_2_5_kib(tmp_path):
    p = make_good_file(tmp_path)
    assert 2000 <= p.stat().st_size <= 4096, p.stat().st_size


@pytest.mark.parametrize("how", WAYS)
def test_file_size_limit_raises_and_keeps_the_old_file(tmp_path, how):
    """RLIMIT_FSIZE of 100 bytes over a good file: the save raises (EFBIG), the
    process is not killed by SIGXFSZ, the old file is untouched and loads."""
    p = make_good_file(tmp_path)
    before = sha(p)
    r = run_py(MODEL, f"""
        m = model(seed=1)
        m.predict(X[:2])
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, resource.RLIM_INFINITY))
        try:
            save_via({how!r}, m, {str(p)!r})
        except OSError as e:
            print("RAISED", e.errno == errno.EFBIG, type(e).__name__)
        else:
            print("SAVED")
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        print("LEFTOVERS", leftovers({str(tmp_path)!r}))
        pg.load_model({str(p)!r}).free()
    """)
    assert "RAISED True" in r.stdout, r.stdout + r.stderr
    assert "LEFTOVERS []" in r.stdout
    assert sha(p) == before


def test_file_size_limit_with_sigxfsz_at_its_default(tmp_path):
    """An application that put SIGXFSZ back to its default (which kills) is not
    killed either: the writer ignores it for the write."""
    p = make_good_file(tmp_path)
    before = sha(p)
    r = run_py(MODEL, f"""
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        m = model(seed=1)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, resource.RLIM_INFINITY))
        try:
            m.save({str(p)!r})
        except OSError as e:
            print("RAISED", errno.errorcode.get(e.errno))
    """)
    assert "RAISED EFBIG" in r.stdout, r.stdout + r.stderr
    assert sha(p) == before


def _can_mount_tmpfs(where):
    if os.geteuid() != 0:
        return False
    os.makedirs(where, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(where)],
                       capture_output=True)
    return r.returncode == 0


@pytest.mark.parametrize("how", ["core", "save", "snapshot"])
def test_full_filesystem_tmpfs(tmp_path, how):
    """A real full disk: a tiny tmpfs (root only; skipped where it cannot be mounted)."""
    mnt = tmp_path / "mnt"
    if not _can_mount_tmpfs(mnt):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        good = make_good_file(tmp_path)
        target = mnt / "m.gguf"
        target.write_bytes(good.read_bytes())
        before = sha(target)
        # fill the rest of the filesystem
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 512) > 0:
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        r = run_py(MODEL, f"""
            m = model(seed=3)
            try:
                save_via({how!r}, m, {str(target)!r})
            except OSError as e:
                print("RAISED", errno.errorcode.get(e.errno))
            print("LEFTOVERS", leftovers({str(mnt)!r}))
        """)
        assert "RAISED ENOSPC" in r.stdout, r.stdout + r.stderr
        assert "LEFTOVERS []" in r.stdout
        assert sha(target) == before
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


# faults injected into the writer's os-level calls (a full disk, an I/O error)
INJECT = """
import os as _os
_real = {name: getattr(_os, name) for name in ("write", "fsync", "close", "replace")}
def inject(name, err, after=0):
    calls = [0]
    def fake(*a, **k):
        calls[0] += 1
        if calls[0] > after:
            raise OSError(err, _os.strerror(err))
        return _real[name](*a, **k)
    setattr(_os, name, fake)
def restore():
    for k, v in _real.items():
        setattr(_os, k, v)
"""


@pytest.mark.parametrize("how", WAYS)
@pytest.mark.parametrize("fault", [("write", "ENOSPC", 0), ("write", "EIO", 1),
                                   ("fsync", "EIO", 0), ("close", "EIO", 0), ("replace", "EXDEV", 0)])
def test_injected_faults_raise_and_keep_the_old_file(tmp_path, how, fault):
    name, err, after = fault
    p = make_good_file(tmp_path)
    before = sha(p)
    r = run_py(MODEL, INJECT, f"""
        m = model(seed=2)
        m.predict(X[:2])
        inject({name!r}, errno.{err}, after={after})
        try:
            save_via({how!r}, m, {str(p)!r})
        except OSError as e:
            print("RAISED", errno.errorcode.get(e.errno))
        else:
            print("SAVED")
        restore()
        print("LEFTOVERS", leftovers({str(tmp_path)!r}))
        pg.load_model({str(p)!r}).free()
    """)
    assert f"RAISED {err}" in r.stdout, r.stdout + r.stderr
    assert "LEFTOVERS []" in r.stdout, r.stdout
    assert sha(p) == before


def test_fsync_file_before_rename_and_folder_after(tmp_path):
    p = tmp_path / "m.gguf"
    r = run_py(MODEL, f"""
        events = []
        _fsync, _replace = os.fsync, os.replace
        def fsync(fd):
            st = os.fstat(fd)
            events.append("fsync-dir" if stat.S_ISDIR(st.st_mode) else "fsync-file")
            return _fsync(fd)
        def replace(a, b):
            events.append("replace")
            return _replace(a, b)
        os.fsync, os.replace = fsync, replace
        model().save({str(p)!r})
        print("EVENTS", events)
    """)
    assert "EVENTS ['fsync-file', 'replace', 'fsync-dir']" in r.stdout, r.stdout


def test_save_through_a_symlink_updates_the_target(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    target = real / "m.gguf"
    link = tmp_path / "link.gguf"
    run_py(MODEL, f"model(seed=1).save({str(target)!r})")
    os.symlink(target, link)
    before = sha(target)
    r = run_py(MODEL, f"""
        m = model(seed=5)
        m.save({str(link)!r})
        got = pg.load_model({str(target)!r})
        for k, v in m.get_weights().items():
            np.testing.assert_array_equal(got.get_weights()[k], v)
        print("OK")
    """)
    assert "OK" in r.stdout
    assert os.path.islink(link) and os.readlink(link) == str(target)
    assert sha(target) != before
    assert sorted(os.listdir(real)) == ["m.gguf"]


def test_save_through_a_dangling_symlink_creates_the_target(tmp_path):
    target = tmp_path / "new.gguf"
    link = tmp_path / "link.gguf"
    os.symlink(target, link)
    run_py(MODEL, f"model().save({str(link)!r}); pg.load_model({str(target)!r})")
    assert os.path.islink(link) and target.is_file()


@pytest.mark.parametrize("mode", [0o644, 0o600, 0o640, 0o604])
def test_mode_of_an_existing_file_is_kept(tmp_path, mode):
    p = make_good_file(tmp_path)
    os.chmod(p, mode)
    for how in WAYS:
        run_py(MODEL, f"save_via({how!r}, model(seed=4), {str(p)!r})")
        assert stat.S_IMODE(os.stat(p).st_mode) == mode, how


@pytest.mark.parametrize("umask,want", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_file_gets_the_umask_mode(tmp_path, umask, want):
    for how in WAYS:
        p = tmp_path / f"{how}-{umask:o}.gguf"
        run_py(MODEL, f"os.umask({umask}); save_via({how!r}, model(), {str(p)!r})")
        assert stat.S_IMODE(os.stat(p).st_mode) == want, how


def test_fifo_is_refused_and_left_alone(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for how in WAYS:
        r = run_py(MODEL, f"""
            try:
                save_via({how!r}, model(), {str(fifo)!r})
            except FileExistsError as e:
                print("REFUSED", "FIFO" in str(e))
            print("LEFTOVERS", leftovers({str(tmp_path)!r}))
        """, timeout=60)
        assert "REFUSED True" in r.stdout, (how, r.stdout, r.stderr)
        assert "LEFTOVERS []" in r.stdout
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_device_node_is_refused_and_left_alone(tmp_path):
    if os.geteuid() == 0:
        dev = tmp_path / "null"
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    else:
        dev = "/dev/null"
    before = os.stat(dev)
    for how in ["core", "save", "save_weights"]:
        r = run_py(MODEL, f"""
            try:
                save_via({how!r}, model(), {str(dev)!r})
            except FileExistsError as e:
                print("REFUSED", "device" in str(e))
        """)
        assert "REFUSED True" in r.stdout, (how, r.stdout, r.stderr)
    after = os.stat(dev)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino


def test_dev_full_is_refused_and_left_alone():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    before = os.stat("/dev/full")
    r = run_py(MODEL, """
        try:
            model().save("/dev/full")
        except FileExistsError as e:
            print("REFUSED")
    """)
    assert "REFUSED" in r.stdout
    after = os.stat("/dev/full")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_directory_is_refused(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "keep").write_text("x")
    r = run_py(MODEL, f"""
        try:
            model().save({str(d)!r})
        except IsADirectoryError:
            print("REFUSED")
    """)
    assert "REFUSED" in r.stdout
    assert (d / "keep").read_text() == "x"


def test_killed_in_the_middle_of_a_save_leaves_the_old_file(tmp_path):
    """SIGKILL while the new file is being written (the child stops in fsync and
    is killed there): the old file is byte-for-byte what it was."""
    p = make_good_file(tmp_path)
    before = sha(p)
    code = script(MODEL, f"""
        def fsync(fd):
            print("IN FSYNC", flush=True)
            time.sleep(60)
        os.fsync = fsync
        model(seed=9).save({str(p)!r})
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "IN FSYNC" in line
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert sha(p) == before
    run_py(MODEL, f"pg.load_model({str(p)!r}).free()")


def test_saves_killed_at_random_moments_leave_a_whole_file(tmp_path):
    """A loop of saves of two different models killed at several moments: the
    file is always one of the two, whole (never a mix, never truncated)."""
    p = tmp_path / "m.gguf"
    code = script(MODEL, f"""
        a, b = model(seed=1), model(seed=2)
        a.save({str(p)!r}); da = digest({str(p)!r})
        b.save({str(p)!r}); db = digest({str(p)!r})
        print(da, db, flush=True)
        while True:
            a.save({str(p)!r})
            b.save({str(p)!r})
    """)
    for delay in (0.05, 0.13, 0.31):
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        try:
            da, db = proc.stdout.readline().split()
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert sha(p) in (da, db)
