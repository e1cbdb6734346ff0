"""An object's create as store requests: one PUT If-None-Match, or (above the part size) a
multipart upload whose Complete, If-None-Match, is the create; and the aborting of uploads
a crash left open. S3 takes no condition on CreateMultipartUpload or UploadPart: the object
appears whole at Complete or not at all, with the ETag "<MD5 of the parts' MD5s>-<parts>"
(the same bytes in the same parts, the same ETag: a stamp changes it as a PUT's)."""

from __future__ import annotations

import contextlib

from kafka_archive.archiver.protocol.steps import (
    AbortUpload,
    CompleteUpload,
    CreateUpload,
    ListUploads,
    Put,
    Steps,
    UploadPart,
    send,
    send_read,
)
from kafka_archive.archiver.protocol.store import Ambiguous, PreconditionFailed, StoreError


def create(
    put: Put, multipart_above: int, part_size: int, *, conditional_complete: bool = True
) -> Steps[str]:
    """Creates `put`'s object If-None-Match: a PUT, or above `multipart_above` bytes an
    upload of `part_size` parts. Answers as the PUT does: the ETag, `PreconditionFailed`
    (the key is taken, or the upload is gone: look at the key) or `Ambiguous` (then the
    caller creates again, with a new upload: an upload of the same attempt that lands late
    is refused at the key, or finds it empty and holds the same bytes). A crash between
    parts leaves an open upload and no object."""
    if len(put.body) <= multipart_above:
        etag: str = yield from send(put)
        return etag
    upload: str = yield from send(CreateUpload(put.key, put.metadata))
    try:
        parts = []
        for n, at in enumerate(range(0, len(put.body), part_size), start=1):
            part = UploadPart(put.key, upload, n, put.body[at : at + part_size])
            parts.append((n, (yield from send(part))))
        complete = CompleteUpload(put.key, upload, tuple(parts), if_none_match=conditional_complete)
        etag = yield from send(complete)
        return etag
    except StoreError as e:
        # taken (a 412 leaves the upload open), aborted by a session's start, completed by a
        # Complete of ours whose answer was lost (AWS: NoSuchUpload, SeaweedFS: 412), or no
        # answer (moto answers 500 for an aborted upload's part or Complete)
        with contextlib.suppress(StoreError):
            yield from send(AbortUpload(put.key, upload))
        refused = Ambiguous if isinstance(e, Ambiguous) else PreconditionFailed
        raise refused(f"{put.key}: upload {upload}: {type(e).__name__}") from None


def abort_open_uploads(prefix: str) -> Steps[None]:
    """Uploads under `prefix` a crash left open (between parts, or before the Complete) hold
    no object, only storage: a session aborts them after its claim, as
    `job.abort_stale_uploads` does. A live writer's upload aborted here costs it a new
    upload (its next part or Complete is refused), never an object."""
    listed = yield from send_read(ListUploads(prefix))
    for u in listed:
        with contextlib.suppress(StoreError):  # gone, or no answer: the next start's
            yield from send(AbortUpload(u.key, u.upload_id))
