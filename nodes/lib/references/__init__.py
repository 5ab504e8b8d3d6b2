"""Pure helpers of the references stage, one concern per module:

* specs: the configured references (``references.core``, ``.project``, ``.session``) and each
  group's default priority
* rules: the project's own rules files (``references.projectRules``) and the bundled GSD rules
* targets: what an @ target names (URL, builtin, path), the files a path may mean, load-once
  keys, how paths are shown, and the names a missing file may have meant
* documents: a document's frontmatter and body, its @ lines, its title and priority
* walk: the depth-first walk (load once, cycles, depth limit) and the order of the sections

Nothing here reads files or the network (the node module ``nodes/references.py`` does). The names
other modules use are re-exported here (``from ctxengine.nodes.lib import references``).
"""

from .documents import (ParsedDocument, at_references, fallback_title, parse_document, parsed_document, priority_for,
                        title_for, without_lines)
from .rules import GSD_RULES, PROJECT_RULES_KEY, RuleFile, RulesChoice, is_gsd_rules, rule_names, with_rules
from .specs import GROUP_PRIORITY_KEYS, GROUPS, ReferenceSpec, group_priorities, reference_specs_from
from .targets import (ReferenceProblem, Target, builtin_name, closest_names, display_path, file_candidates,
                      is_absolute_path, is_drive_path, is_http_url, is_reference_token, normalise_url,
                      suggestion_text, target_kind, url_child)
from .walk import INLINE, RESOLVED, ReferenceLink, ReferenceSet, ordered, root_group, walk_references

__all__ = ["GROUPS", "GROUP_PRIORITY_KEYS", "GSD_RULES", "INLINE", "PROJECT_RULES_KEY", "RESOLVED", "ParsedDocument",
           "ReferenceLink", "ReferenceProblem", "ReferenceSet", "ReferenceSpec", "RuleFile", "RulesChoice", "Target",
           "at_references", "builtin_name", "closest_names", "display_path", "fallback_title", "file_candidates",
           "group_priorities", "is_absolute_path", "is_drive_path", "is_gsd_rules", "is_http_url",
           "is_reference_token", "normalise_url", "ordered", "parse_document", "parsed_document", "priority_for",
           "reference_specs_from", "root_group", "rule_names", "suggestion_text", "target_kind", "title_for", "url_child", "walk_references",
           "with_rules", "without_lines"]
