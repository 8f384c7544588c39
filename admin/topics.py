"""Topic-name rules, as Kafka enforces them."""
from __future__ import annotations

import re

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.groups.internal_topics import INTERNAL_TOPICS  # noqa: F401  (re-exported for the guards)

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str | None) -> None:
    """Raise KafkaApiError(INVALID_TOPIC_EXCEPTION) unless ``name`` is a legal topic name."""
    if not name:
        raise KafkaApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL.match(name):
        raise KafkaApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                            f"Topic name \"{name}\" is illegal, it contains a character other than "
                            "ASCII alphanumerics, '.', '_' and '-'")
