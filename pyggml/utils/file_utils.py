"""Keras's ``get_file``: download a file once into a cache, check it, unpack it.

The cache is ``cache_dir`` (default: ``$KERAS_HOME`` when that variable is set,
else ``~/.keras``, the same folder Keras uses, so files Keras downloaded are found;
``/tmp/.keras`` when that cannot be written) + ``cache_subdir``.

- A download goes to a temporary file in the cache folder, which is renamed to
  its name only once complete and checked: an interrupted or failed download
  (a dropped connection, a short body, Ctrl-C) leaves nothing in the cache.
- With ``file_hash`` (md5 or sha256, told apart by length under
  ``hash_algorithm="auto"``), a cached file that does not match is downloaded
  again; a download that does not match raises a ValueError (and is not kept).
- ``extract=True`` (or the older ``untar=True``) unpacks a tar (plain, gz, bz2, xz)
  or zip archive and returns the folder it was unpacked into, as Keras 3 does.
  Archives are checked before anything is written: a member with an absolute
  path, a ``..`` step, a link that points outside the folder, or a device or
  pipe file makes the whole extraction fail with a ValueError.
- URLs: ``http``, ``https``, ``ftp`` and ``file``.
"""

import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import warnings
import zipfile

from pyggml import config
from pyggml.utils.progbar import Progbar

__all__ = ["get_file", "extract_archive", "hash_file", "validate_file"]

_SCHEMES = ("http", "https", "ftp", "file")
_CHUNK = 1 << 16


def _keras_home():
    return os.path.expanduser(os.environ.get("KERAS_HOME") or os.path.join("~", ".keras"))


def _writable_dir(path):
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK)


def _hasher(algorithm, file_hash=None):
    if algorithm not in ("auto", "md5", "sha256"):
        raise ValueError(f"hash_algorithm must be 'auto', 'md5' or 'sha256', got {algorithm!r}")
    if algorithm == "sha256" or (algorithm == "auto" and file_hash is not None and len(file_hash) == 64):
        return hashlib.sha256()
    return hashlib.md5()


def hash_file(fpath, algorithm="sha256", chunk_size=_CHUNK):
    """The hex digest (sha256 or md5) of a file."""
    h = _hasher(algorithm) if isinstance(algorithm, str) else algorithm
    with open(fpath, "rb") as f:
        for chunk in iter(lambda: f.read(chunk_size), b""):
            h.update(chunk)
    return h.hexdigest()


def validate_file(fpath, file_hash, algorithm="auto", chunk_size=_CHUNK):
    """Whether the file's hash is ``file_hash`` (md5 or sha256, by length under "auto")."""
    return hash_file(fpath, _hasher(algorithm, file_hash), chunk_size) == str(file_hash).lower()


def _inside(root, path):
    root = os.path.realpath(root)
    path = os.path.realpath(path)
    return path == root or path.startswith(root + os.sep)


def _bad_name(name):
    """Why a member name may not be extracted, or None."""
    if not name or "\x00" in name:
        return "an empty name"
    norm = name.replace("\\", "/")
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        return "an absolute path"
    if ".." in norm.split("/"):
        return "a '..' step out of the folder"
    return None


def _check_tar(archive, target):
    for m in archive.getmembers():
        why = _bad_name(m.name)
        if why is None and (m.ischr() or m.isblk() or m.isfifo()):
            why = "a device or pipe file"
        if why is None and (m.issym() or m.islnk()):
            link = m.linkname
            if os.path.isabs(link):
                why = f"a link to the absolute path {link!r}"
            else:
                base = os.path.join(target, os.path.dirname(m.name)) if m.issym() else target
                if not _inside(target, os.path.join(base, link)):
                    why = f"a link to {link!r}, outside the folder"
        if why is not None:
            raise ValueError(f"refusing to extract the archive: its member {m.name!r} has {why}")


def _check_zip(archive):
    # zipfile writes a symbolic link member as a small regular file holding the link's text,
    # so only the names need checking
    for info in archive.infolist():
        why = _bad_name(info.filename)
        if why is not None:
            raise ValueError(f"refusing to extract the archive: its member {info.filename!r} has {why}")


def extract_archive(file_path, path=".", archive_format="auto"):
    """Unpack a tar or zip archive into ``path`` (see the module's notes on safety).
    ``archive_format``: "auto" (tar, then zip), "tar", "zip", a list of those, or None.
    True when the file was one of those formats and was unpacked, else False."""
    if archive_format is None:
        return False
    formats = ["tar", "zip"] if archive_format == "auto" else \
        [archive_format] if isinstance(archive_format, str) else list(archive_format)
    for f in formats:
        if f not in ("tar", "zip"):
            raise ValueError(f"archive_format must be 'auto', 'tar', 'zip', a list of those, or None, got {f!r}")
    file_path, path = os.fspath(file_path), os.fspath(path)
    for f in formats:
        is_it = tarfile.is_tarfile if f == "tar" else zipfile.is_zipfile
        if not is_it(file_path):
            continue
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".extracting-", dir=parent)
        try:
            if f == "tar":
                with tarfile.open(file_path) as archive:
                    _check_tar(archive, staging)
                    if hasattr(tarfile, "data_filter"):
                        archive.extractall(staging, filter="data")
                    else:                                   # pragma: no cover - older Pythons
                        archive.extractall(staging)
            else:
                with zipfile.ZipFile(file_path) as archive:
                    _check_zip(archive)
                    archive.extractall(staging)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.remove(path)
            os.replace(staging, path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return True
    return False


def _download(origin, target):
    """origin -> target, through a temporary file beside it, renamed once complete."""
    config.print_msg(f"Downloading data from {origin}")
    fd, tmp = tempfile.mkstemp(prefix=".downloading-", dir=os.path.dirname(target))
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                response = urllib.request.urlopen(origin)
            except urllib.error.HTTPError as e:
                raise OSError(f"URL fetch failure on {origin}: {e.code} -- {e.reason}") from e
            except urllib.error.URLError as e:
                raise OSError(f"URL fetch failure on {origin}: {e.reason}") from e
            with response:
                length = response.headers.get("Content-Length") if response.headers else None
                total = int(length) if length and length.isdigit() else None
                bar = Progbar(total, unit_name="B") if total else None
                got = 0
                while True:
                    chunk = response.read(_CHUNK)
                    if not chunk:
                        break
                    out.write(chunk)
                    got += len(chunk)
                    if bar is not None and got < total:
                        bar.update(got)
                if total is not None and got != total:
                    raise OSError(f"URL fetch failure on {origin}: the download stopped after {got} of "
                                  f"{total} bytes")
                if bar is not None:
                    bar.update(total, finalize=True)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def get_file(fname=None, origin=None, untar=False, md5_hash=None, file_hash=None, cache_subdir="datasets",
             hash_algorithm="auto", extract=False, archive_format="auto", cache_dir=None, force_download=False):
    """Download ``origin`` into the cache unless it is there already, and return its path
    (or, with ``extract``/``untar``, the folder it was unpacked into).  See the module's notes.

    Args:
        fname: the file's name in the cache (default: the last part of the URL's path). With
            extract, a name with no extension names the extraction folder.
        origin: the URL.
        untar: the older form of ``extract`` (for tar files).
        md5_hash: the older form of ``file_hash`` with ``hash_algorithm="md5"``.
        file_hash: the expected md5 or sha256 hex digest.
        cache_subdir: the folder under cache_dir (an absolute path is used as it is).
        hash_algorithm: "auto", "md5" or "sha256".
        extract: unpack the archive (tar or zip).
        archive_format: "auto", "tar", "zip", a list of those, or None.
        cache_dir: the cache's root (default ``$KERAS_HOME`` or ``~/.keras``).
        force_download: download even when the file is in the cache.
    """
    if origin is None:
        raise ValueError("get_file: give the URL of the file to download as origin")
    if not isinstance(origin, str):
        raise TypeError(f"get_file: origin must be a URL string, got {type(origin).__name__}")
    scheme = urllib.parse.urlsplit(origin).scheme.lower()
    if scheme not in _SCHEMES:
        raise ValueError(f"get_file: origin must be an http, https, ftp or file URL, got {origin!r}")
    if md5_hash is not None and file_hash is None:
        file_hash, hash_algorithm = md5_hash, "md5"
    if file_hash is not None:
        if not isinstance(file_hash, str) or not all(c in "0123456789abcdefABCDEF" for c in file_hash):
            raise ValueError(f"get_file: file_hash must be a hex digest string, got {file_hash!r}")
    _hasher(hash_algorithm, file_hash)                      # checks hash_algorithm
    if archive_format is not None and archive_format != "auto":
        for f in [archive_format] if isinstance(archive_format, str) else list(archive_format):
            if f not in ("tar", "zip"):
                raise ValueError(f"archive_format must be 'auto', 'tar', 'zip', a list of those, or None, "
                                 f"got {archive_format!r}")
    if not isinstance(cache_subdir, (str, os.PathLike)):
        raise TypeError(f"get_file: cache_subdir must be a path, got {cache_subdir!r}")

    base = _keras_home() if cache_dir is None else os.path.expanduser(os.fspath(cache_dir))
    datadir = os.path.join(base, os.fspath(cache_subdir))
    if not _writable_dir(datadir):
        base = os.path.join(tempfile.gettempdir() if not os.path.isdir("/tmp") else "/tmp", ".keras")
        datadir = os.path.join(base, os.fspath(cache_subdir))
        os.makedirs(datadir, exist_ok=True)

    given = fname is not None and os.fspath(fname) != ""
    if given:
        fname = os.fspath(fname)
        if os.sep in fname or (os.altsep and os.altsep in fname):
            raise ValueError(f"get_file: fname is a file name, not a path (give the folder as cache_dir), "
                             f"got {fname!r}")
        if fname in (".", ".."):
            raise ValueError(f"get_file: fname {fname!r} is not a file name")
    else:
        fname = os.path.basename(urllib.parse.urlsplit(origin).path)
        if not fname:
            raise ValueError(f"get_file: cannot take a file name from the origin {origin!r}: give fname")
    if extract or untar:
        if given and "." in fname:
            target = os.path.join(datadir, fname)
            extraction_dir = os.path.join(datadir, fname[:fname.find(".")] + "_extracted")
        else:
            target = os.path.join(datadir, fname + "_archive")
            extraction_dir = os.path.join(datadir, fname)
    else:
        target = os.path.join(datadir, fname)

    download = force_download or not os.path.exists(target)
    if not download and file_hash is not None and not validate_file(target, file_hash, hash_algorithm):
        config.print_msg(f"A local file was found, but its {hash_algorithm} hash does not match {file_hash}: "
                         f"downloading it again.")
        download = True
    if download:
        _download(origin, target)
        if file_hash is not None and not validate_file(target, file_hash, hash_algorithm):
            os.remove(target)
            raise ValueError(f"get_file: the file downloaded from {origin} is incomplete or corrupted: its "
                             f"{hash_algorithm} hash does not match {file_hash}")
    if extract or untar:
        if download or not os.path.isdir(extraction_dir):
            if not extract_archive(target, extraction_dir, "tar" if untar else archive_format):
                warnings.warn(f"get_file: {target} is not an archive of the format asked for "
                              f"({archive_format!r}); nothing was extracted", stacklevel=2)
        return extraction_dir
    return target
