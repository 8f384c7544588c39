"""What the operator-command tests share: a module's embedded kwire broker (modules that need
other server properties define their own ``broker`` fixture)."""
from __future__ import annotations

import pytest

import kwire.testing
from kwire.tools.groups import main as groups_main


@pytest.fixture(scope="module")
def broker():
    """An embedded kwire broker (num.partitions=1) for one test module."""
    with kwire.testing.broker(partitions=1) as b:
        yield b


@pytest.fixture
def groups(broker, capsys):
    """``kwire groups`` against the module's broker: groups("describe", "--group", g) ->
    (exit code, stdout, stderr)."""
    def call(*argv):
        capsys.readouterr()
        code = groups_main([*argv, "--bootstrap-server", broker.bootstrap])
        captured = capsys.readouterr()
        return code, captured.out, captured.err
    return call
