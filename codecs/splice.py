"""Responses whose record fields are sent later from files (sendfile).

A ``records`` value may be a *deferred* object with a ``size`` attribute (the
number of record bytes it stands for).  ``encode_spliced`` returns the body as
a list of parts: ``bytes`` to send as they are and the deferred objects to
stream in their place, each deferred part preceded by its length prefix::

    non-flexible versions:  int32 length        | record bytes
    flexible versions:      uvarint(length + 1) | record bytes

The encoder (``messages``) writes each prefix and cuts the parts while it
walks the schema, so positions are known structurally: no marker bytes are
searched for in the output.
"""
from __future__ import annotations

from .messages import encode_spliced, parts_size

__all__ = ["encode_spliced", "parts_size"]
