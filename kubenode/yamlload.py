"""YAML with anchors and aliases, expanded under go-yaml's alias budget, as kubectl and kube-apiserver do.

Flow: PyYAML's safe composer builds each document's node graph, in which an alias is a second reference to
the anchored node, so a kilobyte "billion laughs" stays a kilobyte there. Before anything is constructed,
`check_alias_budget` walks the graph as go-yaml's decoder would expand it, counting every node decoded
and those decoded inside an alias, and stops at go-yaml's rule: once more than 100 nodes came from aliases
and more than 1,000 were decoded, the share from aliases may not pass 99% (documents up to 400,000
nodes), falling linearly to 10% (4,000,000 nodes and more). A document over budget raises `ExcessiveAliasing`
(a `yaml.YAMLError` marked with the alias's place), after at most a few thousand steps, so the bomb costs no
memory. A document within budget is constructed by the safe constructor and then unshared: every alias
becomes its own copy, as in Go, so changing one place never changes another.
"""

from __future__ import annotations

from typing import Any

import yaml

ALIAS_RATIO_LOW = 400_000  # go-yaml: up to here 99% of the decoded nodes may come from aliases
ALIAS_RATIO_HIGH = 4_000_000  # from here on 10%


def allowed_alias_ratio(decoded: int) -> float:
    """go-yaml's allowedAliasRatio."""
    if decoded <= ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - ALIAS_RATIO_LOW) / (ALIAS_RATIO_HIGH - ALIAS_RATIO_LOW)


class ExcessiveAliasing(yaml.composer.ComposerError):
    """A document whose aliases expand past go-yaml's budget (go-yaml says `excessive aliasing`)."""


def check_alias_budget(root: yaml.Node) -> None:
    """Walk `root` as it expands (in document order); raise ExcessiveAliasing once over go-yaml's budget."""
    decoded = 1  # go-yaml counts the document node too
    from_aliases = 0
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, in_alias = stack.pop()
        if id(node) in seen:  # a second reference: an alias (or a `<<: *merge`), itself one node for go-yaml
            decoded += 1
            from_aliases += in_alias
            in_alias = True
        else:
            seen.add(id(node))
        decoded += 1
        from_aliases += in_alias
        if from_aliases > 100 and decoded > 1000 and from_aliases / decoded > allowed_alias_ratio(decoded):
            raise ExcessiveAliasing(
                None,
                None,
                f"document contains excessive aliasing: aliases expand to {from_aliases} of {decoded} nodes "
                f"(at most {allowed_alias_ratio(decoded):.0%}, go-yaml's limit)",
                node.start_mark,
            )
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, in_alias) for child in reversed(node.value))
        elif isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                stack.append((value, in_alias))
                stack.append((key, in_alias))


def _unshared(data: Any) -> Any:
    """A copy in which no dict or list appears twice (the safe constructor shares an alias's object)."""
    if isinstance(data, dict):
        return {key: _unshared(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_unshared(item) for item in data]
    return data


class BudgetLoader(yaml.SafeLoader):
    """yaml.SafeLoader plus go-yaml's alias budget; documents without aliases are loaded as before."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.aliased = False

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliased = True
        return super().compose_node(parent, index)

    def construct_document(self, node: Any) -> Any:
        if not self.aliased:
            return super().construct_document(node)
        check_alias_budget(node)
        self.aliased = False  # per document
        return _unshared(super().construct_document(node))


def load(text: str | bytes) -> Any:
    """One document (None for an empty stream), as yaml.safe_load with go-yaml's alias budget."""
    return yaml.load(text, Loader=BudgetLoader)  # BudgetLoader is a SafeLoader


def load_all(text: str | bytes) -> list[Any]:
    """Every document, as yaml.safe_load_all with go-yaml's alias budget."""
    return list(yaml.load_all(text, Loader=BudgetLoader))  # BudgetLoader is a SafeLoader
