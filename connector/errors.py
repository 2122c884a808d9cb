"""The one base class of the connector's errors: ``except KinesisConnectorError`` catches any of them.

Each error the connector raises derives from ``KinesisConnectorError`` and keeps its standard base second
(``class OptionError(KinesisConnectorError, ValueError)``), so ``except ValueError`` and the like still catch what
they did. Which to catch: docs/errors.md. It imports nothing of the connector: every layer may import it.
"""

from __future__ import annotations

__all__ = ["KinesisConnectorError"]


class KinesisConnectorError(Exception):
    """Any error of the connector (options, reads, data loss, writes, metadata, consumers): catch this one to
    handle them all. Each subclass also keeps its standard base (ValueError, RuntimeError, OSError)."""
