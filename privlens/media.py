"""What the browser fetches: ids that name no private content, and nothing from another host.

**Media ids.** Streamlit serves every ``st.image`` and ``st.download_button`` file at
``/media/<id>`` to anyone who asks, with no session, for as long as a session shows it (and a while
after). Its id is a plain hash of the bytes, MIME type and file name, so a person with no session who
holds a candidate image (the Release page's input PNG is a deterministic function of the upload) could
compute the id offline and learn from a 200 that someone has that image open. :func:`install`
replaces that id, in this server process, by

    HMAC-SHA256(secret, session id, bytes, MIME type, file name)

under a 32-byte secret drawn from :func:`secrets.token_bytes` once per process and never written
anywhere. Without the secret nobody can derive an id; and because the session is part of the key, the
same image in two sessions has two ids, so another *user* who uploads the same image learns nothing
either (with one id per process, whether the file outlived their own session would tell them). Within
a session ids stay stable, so reruns reuse a file as before. A file stored outside any script run (a
deferred download, built when clicked) gets a fresh random salt: a new id each time.

It fails closed: if Streamlit's internals it replaces are not what this module was written against
(``streamlit==1.67.0``; after an upgrade, or with a media storage plugged in by a host), :func:`install`
raises :class:`MediaIdError` and the page stops before anything is shown, rather than serving
content-hash ids.

**The tab icon.** :data:`PAGE_ICON` is a local SVG, which Streamlit inlines as a
``data:`` URL; a ``:material/...:`` page icon makes every page load ask Google's font CDN for it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from pathlib import Path

__all__ = ["PAGE_ICON", "MediaIdError", "install", "media_file_id"]

PAGE_ICON = Path(__file__).resolve().parent / "static" / "privlens-icon.svg"

_SECRET = secrets.token_bytes(32)  # once per server process; in memory only
_DOMAIN = b"privlens.media-id/1"
_last = threading.local()  # the id _keyed_file_id last returned in this thread (install's probe)


class MediaIdError(RuntimeError):
    """Streamlit's media storage is not the one whose ids :func:`install` knows how to key."""


def _session_salt() -> str:
    """The current script run's session id, or a fresh random salt outside any script run."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    session_id = getattr(ctx, "session_id", None)
    return f"session:{session_id}" if session_id else f"once:{secrets.token_hex(16)}"


def media_file_id(
    data: bytes,
    mimetype: str,
    filename: str | None = None,
    *,
    salt: str | None = None,
    secret: bytes | None = None,
) -> str:
    """The keyed id of a media file: HMAC-SHA256 over every part, each length-prefixed (so no two
    different inputs share an encoding). ``salt`` defaults to the current session; ``secret`` to this
    process's."""
    mac = hmac.new(_SECRET if secret is None else secret, digestmod=hashlib.sha256)
    name = b"\x00" if filename is None else b"\x01" + filename.encode()
    session = (_session_salt() if salt is None else salt).encode()
    for part in (_DOMAIN, session, mimetype.encode(), name, data):
        mac.update(len(part).to_bytes(8, "big"))
        mac.update(part)
    return mac.hexdigest()


def _keyed_file_id(data: bytes, mimetype: str, filename: str | None = None) -> str:
    """Drop-in for Streamlit's ``_calculate_file_id(data, mimetype, filename)``."""
    _last.id = media_file_id(bytes(data), mimetype, filename)
    return _last.id


def install() -> None:
    """Key every media id of this process (idempotent: app.py calls it on every run, before any
    element). Raises :class:`MediaIdError` when it cannot vouch for the ids the server hands out."""
    try:
        from streamlit import runtime
        from streamlit.runtime import memory_media_file_storage as mms
        from streamlit.runtime.media_file_storage import MediaFileKind
    except ImportError as exc:  # pragma: no cover - a Streamlit without these modules
        raise MediaIdError(f"privlens cannot key media ids on this Streamlit: {exc}") from exc
    storage_cls = getattr(mms, "MemoryMediaFileStorage", None)
    load = getattr(storage_cls, "load_and_get_id", None)
    if not callable(getattr(mms, "_calculate_file_id", None)) or "_calculate_file_id" not in getattr(
        getattr(load, "__code__", None), "co_names", ()
    ):
        raise MediaIdError(
            "privlens cannot key media ids: streamlit.runtime.memory_media_file_storage no longer derives "
            "them through _calculate_file_id (written for streamlit==1.67.0). Refusing to serve images "
            "under ids derived from their content; pin streamlit==1.67.0 or update privlens/media.py."
        )
    mms._calculate_file_id = _keyed_file_id  # what MemoryMediaFileStorage.load_and_get_id calls
    probe = secrets.token_bytes(16)
    _last.id = None
    got = storage_cls("/probe").load_and_get_id(probe, "application/octet-stream", MediaFileKind.MEDIA)
    if got != _last.id:
        raise MediaIdError("privlens cannot key media ids: Streamlit's storage did not use the keyed id")
    if runtime.exists():
        manager = runtime.get_instance().media_file_mgr
        storage = getattr(manager, "_storage", None)
        if not isinstance(storage, storage_cls) or type(storage).load_and_get_id is not load:
            raise MediaIdError(
                f"privlens cannot key media ids: the server stores media in {type(storage).__name__}, "
                "not Streamlit's MemoryMediaFileStorage; refusing to serve images under ids it derives."
            )
