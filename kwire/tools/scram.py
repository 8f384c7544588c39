"""``kwire scram``: the older name of ``kwire users`` (kwire.tools.users), kept so scripts
and ``python -m kwire.tools.scram --bootstrap-server HOST:PORT set|delete|describe ...`` go on
working; one implementation and one parser serve both names."""
from __future__ import annotations

import sys

from kwire.tools.users import MECHANISMS, read_password, scram_main as main

__all__ = ["MECHANISMS", "main", "read_password"]

if __name__ == "__main__":
    sys.exit(main())
