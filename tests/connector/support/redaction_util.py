"""The external ID the redaction tests plant."""

from __future__ import annotations

EXTERNAL_ID = "external-id-value-1234"
