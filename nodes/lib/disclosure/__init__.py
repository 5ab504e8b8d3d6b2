"""Pure helpers of progressive disclosure, one concern per module:

* globs: the glob dialect of the rules (and the natural order of paths)
* request: what the request names (``@doc URL``, file names and paths) and the files they name
* signals: what triggers look at (request, plan, diff, changed files) and keyword/path hits
* rules: the rules of ``configs/disclosure.yaml`` (types, a project's file laid over them,
  validation)
* phases: the documents the current GSD phase's rules load
* decisions: the disclosure plan, a decision (layer, rule or reason) per candidate document

Nothing here reads files or the network (the node module ``nodes/disclosure.py`` does). The names
other modules use are re-exported here (``from ctxengine.nodes.lib import disclosure``).
"""

from .decisions import (NAMED, Candidate, Decision, FetchedDoc, decide, frontmatter_list, generic_candidates,
                     project_relative, section_key, url_decisions)
from .globs import first_match, glob_match, glob_regex, natural_key
from .phases import PhaseSelection, phase_selection
from .request import (DOCUMENT_SUFFIXES, OUTSIDE, NamedFiles, display_of, project_documents, request_names,
                      request_urls, resolve_named)
from .rules import PHASES, PICKS, DisclosureRules, ModeRule, PhaseEntry, TriggerRule, merge_rules, parse_rules
from .signals import SIGNALS, Signals, keyword_hit, keyword_in, path_hit, plan_signal_text

__all__ = ["DOCUMENT_SUFFIXES", "NAMED", "OUTSIDE", "PHASES", "PICKS", "SIGNALS", "Candidate", "Decision",
           "DisclosureRules", "FetchedDoc", "ModeRule", "NamedFiles", "PhaseEntry", "PhaseSelection", "Signals",
           "TriggerRule", "decide", "display_of", "first_match", "frontmatter_list", "generic_candidates",
           "glob_match", "glob_regex", "keyword_hit", "keyword_in", "merge_rules", "natural_key", "parse_rules",
           "path_hit", "phase_selection", "plan_signal_text", "project_documents", "project_relative",
           "request_names", "request_urls", "resolve_named", "section_key", "url_decisions"]
