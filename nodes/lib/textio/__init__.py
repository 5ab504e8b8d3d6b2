"""Reading the user's text (files and URLs) with caps, the trust rules and errors that name
what failed and how to fix it, one concern per module:

* trust: the trust rules (``Trust``, from the ``trust.*`` keys), ``TextUnavailable`` /
  ``Refused``, and the hints that say how to widen trust
* clean: cleaning (NUL, control characters, ANSI escapes removed and counted) and decoding
* files: configuration files, project files under the trust rules, folder listings
* urls: http(s) fetching under the trust rules, with address filtering

Every read of project content goes through ``read_local_text`` (files) or ``fetch_url``
(http/https); callers make a ``TextUnavailable`` a warning and leave the document out. The names
other modules use are re-exported here (``from ctxengine.nodes.lib.textio import ...``).
"""

from .clean import clean_text, clean_utf8
from .files import (CONFIG_MAX_BYTES, DEFAULT_MAX_FILE_BYTES, list_files, read_config_text, read_local_text,
                    read_text_file)
from .trust import (Refused, TextUnavailable, Trust, allowed_paths, exit_point, trust_from, trusted_path,
                    without_widening_hints)
from .urls import METADATA_HOSTS, address_refusal, embedded_ipv4, fetch_url

__all__ = ["CONFIG_MAX_BYTES", "DEFAULT_MAX_FILE_BYTES", "METADATA_HOSTS", "Refused", "TextUnavailable", "Trust",
           "address_refusal", "allowed_paths", "clean_text", "clean_utf8", "embedded_ipv4", "exit_point", "fetch_url",
           "list_files", "read_config_text", "read_local_text", "read_text_file", "trust_from", "trusted_path",
           "without_widening_hints"]
