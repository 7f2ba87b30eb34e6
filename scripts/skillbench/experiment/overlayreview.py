"""The content review of a candidate overlay: what its text adds to the incumbent skills, before it runs and before
it is applied.

A candidate is written by a proposer that reads agent-written transcripts, so its text may carry an attack from a
hostile task agent to every developer who applies it. Two kinds of finding, each on text the incumbent file at the
same path did not have (a finding the incumbent already carries is not new):

- **Refused** (`ContentReview.refusals`; `freeze_overlay` and the preflight of `evolution.initial_overlay` stop
  on any): content that executes or grants privileges when the skill loads, with no tool call of the model's.
  ``skill-shell``: a `` !`command` `` or a ```` ```! ```` block (Claude Code runs both when it loads the skill,
  before the model sees it; the match is wider than the CLI's own, `(?<=^|\\s)!`([^`]+)`` and
  ```` ```!\\s*\\n?([\\s\\S]*?)\\n?``` ````, so nothing it runs is missed). ``frontmatter-key``: a SKILL.md
  frontmatter key outside `DESCRIPTIVE_KEYS` that the incumbent lacks or holds with another value
  (`allowed-tools`, `hooks`, `model`, `effort`, `context`, `agent`, `shell`, …). ``invisible-text``: bidirectional
  control characters, which make a reviewer read the diff in another order than the model does.
- **Flagged** (`ContentReview.flags`; a flagged candidate is never promoted unless the user lists each flag's
  category in `evolution.accept_flags`): text that touches tests (``tests``), credentials (``secrets``), the
  network (``network``) or runs shell commands outside the task's own tools (``shell``). The rules are the
  regular expressions of `FLAG_RULES` and the command rule of `_commands`, matched case-insensitively on each
  logical block (a paragraph, a list item, a heading, a code line) with its lines joined.

What counts as new: a refusal's construct (the command text, the key and its value) that the incumbent file does
not hold; a flag whose block and matched text the incumbent file does not hold (so an edited sentence is flagged
again, an untouched one is not). Deterministic, pure: the same bytes give the same review (`RULES_VERSION`).
"""

from __future__ import annotations

import difflib
import hashlib
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TypedDict

import yaml

from skillbench.base.artifacts import read_regular_file
from skillbench.base.records import ContentFlag, ContentReviewRecord
from skillbench.experiment.overlay import MAX_TOTAL_BYTES, OverlayError, skill_relative

RULES_VERSION = "content-review/v1"
FLAG_CATEGORIES = ("tests", "secrets", "network", "shell")
MAX_MATCH_CHARS = 160

# Frontmatter keys a candidate may add or change: what a skill says about itself, nothing that runs or grants.
DESCRIPTIVE_KEYS = frozenset(
    {"name", "description", "license", "compatibility", "metadata", "when_to_use", "argument-hint", "version"}
)
# Why a known key is refused (any other key outside DESCRIPTIVE_KEYS is refused as not descriptive).
PRIVILEGED_KEYS = {
    "allowed-tools": "grants tools the session may use without asking",
    "disallowed-tools": "changes the session's tool surface",
    "disallowedtools": "changes the session's tool surface",
    "hooks": "registers commands that run on the session's events",
    "model": "switches the session to another model",
    "effort": "changes the model's thinking effort",
    "context": "runs the skill in a forked subagent",
    "agent": "picks the subagent the skill runs in",
    "shell": "picks the shell of the skill's `!` command blocks",
    "mcpservers": "starts MCP servers",
    "lspservers": "starts language servers",
}
_INLINE_SHELL = re.compile(r"!`[^`]+`")
_BLOCK_SHELL = re.compile(r"(?:`{3,}|~{3,})[ \t]*!")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
# The CLI's frontmatter: `---` on the first line, up to the next `---` anywhere (it ends the match mid-line too).
_CLI_FRONTMATTER = re.compile(r"\A(?:\ufeff)?---\s*\n([\s\S]*?)---")
_TOP_LEVEL_KEY = re.compile(r"""^(?:"([^"]+)"|'([^']+)'|([^\s#'"{\[\-][^:]*?))\s*:(?:\s|$)""", re.MULTILINE)

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})\s*([^\s`]*)")
_BLOCK_START = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|#{1,6}\s|>)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
SHELL_FENCES = frozenset(
    {"sh", "bash", "shell", "console", "zsh", "fish", "ksh", "dash", "terminal", "powershell", "pwsh", "ps1", "cmd"}
)
# Programs a code span or an option-taking prose word is read as a command of. Read-only viewers (cat, grep, ls,
# head, …) are left out: the agent's own Read and Grep tools do the same.
SHELL_PROGRAMS = frozenset(
    """sh bash zsh dash fish ksh csh tcsh pwsh powershell env sudo su doas eval exec source nohup setsid xargs
    timeout watch rm rmdir mv cp ln chmod chown chgrp chattr dd mkfs mount umount shred truncate kill pkill killall
    crontab systemctl service launchctl curl wget nc ncat netcat socat ssh scp sftp rsync telnet ftp tftp ping dig
    nslookup git python python3 python2 pip pip3 pipx uv poetry node npm npx yarn pnpm bun deno ruby gem perl php go
    cargo rustc java javac mvn gradle make cmake gcc cc clang docker podman kubectl helm terraform aws gcloud az gh
    apt apt-get dpkg yum dnf apk brew snap tar zip unzip gzip base64 openssl gpg printenv export unset alias pytest
    tox nox sed awk find tee touch mkdir""".split()
)
_COMMAND_SPLIT = re.compile(r"&&|\|\||[;|&()]|\$\(")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PROSE_COMMAND = re.compile(
    r"(?<![\w./-])(" + "|".join(sorted(map(re.escape, SHELL_PROGRAMS), key=len, reverse=True)) + r")\s+--?[A-Za-z]"
)

_TEST_VERBS = (
    r"(?:skip(?:s|ped|ping)?|xfail\w*|deselect\w*|disabl\w+|delet\w+|remov\w+|comment(?:s|ed|ing)?\s+out|"
    r"weaken\w*|loosen\w*|relax\w*|ignor\w+|mut(?:e|es|ed|ing)|silenc\w+|suppress\w*|bypass\w*|"
    r"drop(?:s|ped|ping)?|soften\w*|stub(?:s|bed|bing)?\s+out)"
)
_TEST_NOUNS = (
    r"(?:tests?|testing|test\s+cases?|assert\w*|specs?|verify|verification|checks?|oracle|fixtures?|conftest|"
    r"pytest|ci|linters?|coverage|suite)"
)
_NEAR = r"(?:\W+\w+){0,5}?\W+"
_TLDS = r"(?:com|net|org|io|dev|app|xyz|co|me|ai|sh|site|cloud|info|biz|ru|cn|tk|top|example|test|local|internal)"
# (category, rule, pattern): matched case-insensitively on each logical block of added text.
FLAG_RULES: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (category, rule, re.compile(pattern, re.IGNORECASE))
    for category, rule, pattern in (
        (
            "tests",
            "test-marker",
            r"(?<!\w)(?:xfail|pytest\.skip|mark\.skip(?:if)?|unittest\.skip|skip(?:if|unless)\b|@skip|@ignore|"
            r"@disabled|it\.skip|test\.skip|describe\.skip|xit\(|xdescribe|t\.skip|--deselect|--no-verify|"
            r"-k\s+['\"]?not\b)",
        ),
        ("tests", "test-weakening", rf"\b{_TEST_VERBS}{_NEAR}{_TEST_NOUNS}\b|\b{_TEST_NOUNS}{_NEAR}{_TEST_VERBS}\b"),
        (
            "secrets",
            "secret-word",
            r"\b(?:credentials?|secrets?|passwords?|passwd|passphrases?|api[\s_-]?keys?|(?:access|auth|"
            r"authentication|session|bearer|refresh|github|npm)[\s_-]?tokens?|bearer|private[\s_-]?keys?|"
            r"ssh[\s_-]?keys?|keychain|keyring)\b",
        ),
        (
            "secrets",
            "secret-file",
            r"(?<![\w-])(?:~/|\$home/|/root/|/home/\w+/)?\.(?:ssh|aws|gnupg|netrc|npmrc|pypirc|git-credentials|kube|"
            r"docker/config\.json)\b|\bid_(?:rsa|ed25519|ecdsa|dsa)\b|(?<![\w.])\.env\b|/proc/\S*environ",
        ),
        (
            "secrets",
            "secret-variable",
            r"\b[a-z][a-z0-9_]*_(?:key|token|secret|password|pass|credentials?)\b|"
            r"\b(?:anthropic|openai|aws|github|gh|google|azure)_[a-z0-9_]+\b|\bprintenv\b|(?<![\w-])env\s*[|>]",
        ),
        ("network", "url", r"\b(?:https?|ftps?|sftp|wss?|file|gopher|dict|ldap)://[^\s)>\]`'\"]+"),
        (
            "network",
            "network-tool",
            r"(?<![\w./-])(?:curl|wget|netcat|ncat|socat|ssh|scp|sftp|rsync|telnet|tftp|nslookup|aria2c|"
            r"invoke-webrequest|invoke-restmethod)(?![\w-])|(?<![\w./-])nc\s+-",
        ),
        (
            "network",
            "network-call",
            r"/dev/(?:tcp|udp)/|\brequests\.(?:get|post|put|patch|delete)\b|\burllib\b|\bhttp\.client\b|"
            r"\bfetch\s*\(|\bxmlhttprequest\b|\bsocket\.(?:socket|create_connection)\b|"
            r"\bgit\s+(?:push|remote|clone|fetch|pull)\b|\b(?:pip3?|npm|pnpm|yarn|gem|cargo|go)\s+(?:install|add|get)\b"
            r"|\bnpx\b",
        ),
        (
            "network",
            "exfiltration",
            rf"\b(?:exfiltrat\w*|upload\w*|webhooks?|pastebin|beacon\w*)\b|"
            rf"\b(?:post|send|upload|transmit|forward|submit|push|copy|report)\w*{_NEAR}to\W+"
            rf"(?:https?://|the\s+(?:server|endpoint|collector|url|webhook|api)\b|(?:[a-z0-9-]+\.)+{_TLDS}\b)",
        ),
        ("network", "host", rf"\b(?:[a-z0-9-]+\.)+{_TLDS}\b(?![.\w-])|\b(?:\d{{1,3}}\.){{3}}\d{{1,3}}\b"),
        (
            "shell",
            "shell-construct",
            r"\|\s*(?:ba|z|da|k)?sh\b|\beval\b|\bbase64\s+(?:-d|--decode)\b|\b(?:bash|sh|zsh)\s+-c\b|\bsudo\b|"
            r"\bchmod\s+[+0-7ugoa]|\brm\s+-[a-z]*[rf]|\bcrontab\b|\bnohup\b|\$\(",
        ),
    )
)


class ContentRefusal(TypedDict):
    """Content a candidate may never add: the overlay is refused."""

    file: str
    line: int
    rule: str
    reason: str
    text: str


@dataclass(frozen=True)
class ContentReview:
    refusals: list[ContentRefusal] = field(default_factory=list)
    flags: list[ContentFlag] = field(default_factory=list)


# ─── Reading the text ───────────────────────────────────────────────────────


@dataclass(frozen=True)
class _Block:
    """One logical block: its lines joined by single spaces, where each line starts in the joined text, and the
    info string of the code fence it is a line of (None outside a fence, "" for an untagged fence)."""

    text: str
    starts: tuple[tuple[int, int], ...]  # (offset in text, line number)
    fence: str | None

    def line_at(self, offset: int) -> int:
        line = self.starts[0][1]
        for start, number in self.starts:
            if start > offset:
                break
            line = number
        return line


def _blocks(text: str) -> list[_Block]:
    """Paragraphs, list items, headings and quotes as blocks; every line inside a code fence its own block (the
    fence lines themselves are no block)."""
    blocks: list[_Block] = []
    current: list[tuple[int, str]] = []
    fence: tuple[str, str] | None = None  # (marker, info)

    def flush() -> None:
        if current:
            blocks.append(_joined(current, None))
            current.clear()

    for number, line in enumerate(text.splitlines(), start=1):
        opened = _FENCE.match(line)
        if fence is not None:
            closes = (
                opened is not None
                and opened.group(1)[0] == fence[0][0]
                and len(opened.group(1)) >= len(fence[0])
                and not opened.group(2)
            )
            if closes:
                fence = None
            elif line.strip():
                blocks.append(_joined([(number, line)], fence[1]))
            continue
        if opened:
            flush()
            fence = (opened.group(1), opened.group(2))
            continue
        if not line.strip() or _BLOCK_START.match(line):
            flush()
        if line.strip():
            current.append((number, line))
    flush()
    return blocks


def _joined(lines: list[tuple[int, str]], fence: str | None) -> _Block:
    parts, starts, offset = [], [], 0
    for number, line in lines:
        piece = line.strip()
        starts.append((offset, number))
        parts.append(piece)
        offset += len(piece) + 1
    return _Block(" ".join(parts), tuple(starts), fence)


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _clip(text: str) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= MAX_MATCH_CHARS else flat[: MAX_MATCH_CHARS - 1] + "…"


# ─── Refusals ───────────────────────────────────────────────────────────────


def _shell_constructs(text: str) -> list[tuple[int, str]]:
    """(line, construct as written) of every `!` command the CLI could run when the skill loads."""
    found = [(_line_of(text, m.start()), m.group(0)) for m in _INLINE_SHELL.finditer(text)]
    for match in _BLOCK_SHELL.finditer(text):
        marker = match.group(0).lstrip()[:3]
        closing = text.find(marker, match.end())
        found.append((_line_of(text, match.start()), text[match.start() : len(text) if closing < 0 else closing + 3]))
    return found


def frontmatter_keys(text: str) -> dict[str, tuple[int, str, str]]:
    """Top-level frontmatter key (case-folded) → (line, its value normalized, as written), the value running to
    the next key; read as the CLI
    finds the frontmatter (`---` to the next `---`, even mid-line) and as a line-based reader does (to a `---`
    line), each by key lines and by a YAML parser: a key any of them sees is never missed."""
    found: dict[str, tuple[int, str, str]] = {}
    match = _CLI_FRONTMATTER.match(text)
    if not match:
        return found
    sections = [(match.start(1), match.group(1))]
    lines = text.splitlines(keepends=True)
    closing = next((index for index in range(1, len(lines)) if lines[index].strip() == "---"), None)
    if closing is not None:
        sections.append((len(lines[0]), "".join(lines[1:closing])))
    for offset, section in sections:
        keys = list(_TOP_LEVEL_KEY.finditer(section))
        for index, key in enumerate(keys):
            name = next(group for group in key.groups() if group is not None).strip().casefold()
            value = section[key.end() : keys[index + 1].start() if index + 1 < len(keys) else len(section)]
            found.setdefault(name, (_line_of(text, offset + key.start()), _normal(value), value.strip()))
        try:
            parsed = yaml.safe_load(section)
        except yaml.YAMLError:
            parsed = None
        if isinstance(parsed, dict):
            for name, value in parsed.items():
                found.setdefault(str(name).casefold(), (_line_of(text, offset), _normal(str(value)), str(value)))
    return found


def _refusals(relative: str, text: str, incumbent: str | None) -> list[ContentRefusal]:
    refusals: list[ContentRefusal] = []
    before = incumbent or ""
    known = {_normal(construct) for _, construct in _shell_constructs(before)}
    for line, construct in _shell_constructs(text):
        if _normal(construct) not in known:
            refusals.append(
                {
                    "file": relative,
                    "line": line,
                    "rule": "skill-shell",
                    "reason": "a `!` command runs when the skill loads, before the model sees it and without a tool "
                    "call (the incumbent has no such command)",
                    "text": _clip(construct),
                }
            )
    if PurePosixPath(relative).name.lower() == "skill.md":
        had = frontmatter_keys(before)
        for key, (line, value, written) in sorted(frontmatter_keys(text).items(), key=lambda item: item[1][0]):
            if key in DESCRIPTIVE_KEYS or (key in had and had[key][1] == value):
                continue
            why = PRIVILEGED_KEYS.get(
                key, f"is not one of the descriptive keys a candidate may add ({', '.join(sorted(DESCRIPTIVE_KEYS))})"
            )
            change = "changes the incumbent's value" if key in had else "is a key the incumbent does not have"
            refusals.append(
                {
                    "file": relative,
                    "line": line,
                    "rule": "frontmatter-key",
                    "reason": f"frontmatter `{key}` {why}; it {change}",
                    "text": _clip(f"{key}: {written}"),
                }
            )
    if not _BIDI.search(before):
        for match in _BIDI.finditer(text):
            refusals.append(
                {
                    "file": relative,
                    "line": _line_of(text, match.start()),
                    "rule": "invisible-text",
                    "reason": f"a bidirectional control character (U+{ord(match.group(0)):04X}) makes a reviewer "
                    "read the text in another order than the model does",
                    "text": f"U+{ord(match.group(0)):04X}",
                }
            )
    return refusals


# ─── Flags ──────────────────────────────────────────────────────────────────


def command_programs(command: str) -> list[str]:
    """The program each simple command of a shell line starts (env assignments skipped, paths stripped)."""
    programs = []
    for segment in _COMMAND_SPLIT.split(command):
        try:
            words = shlex.split(segment, comments=True)
        except ValueError:
            words = segment.split()
        while words and _ASSIGNMENT.match(words[0]):
            words.pop(0)
        if words:
            head = words[0]
            programs.append(head if head.startswith(".") else PurePosixPath(head).name or head)
            if len(words) > 2 and words[1] == "-m" and PurePosixPath(head).name.startswith("python"):
                programs.append(words[2])
    return programs


def task_programs(commands: Iterable[str | None]) -> list[str]:
    """The task's own tools: every program the tasks' `setup` and `verify` commands start, sorted."""
    return sorted({program for command in commands if command for program in command_programs(command)})


def suite_task_tools(tasks: Iterable[Mapping[str, object]]) -> list[str]:
    """`task_programs` of the tasks' `setup` and `verify` commands (task-suite entries)."""
    return task_programs(
        command for task in tasks for command in (task.get("setup"), task.get("verify")) if isinstance(command, str)
    )


def _commands(block: _Block) -> list[tuple[int, str]]:
    """(offset, command) of the shell commands a block states: a line of a shell fence or one with a `$ ` prompt,
    a code span that starts with a known program, or a known program followed by an option in prose."""
    text = block.text
    if block.fence is not None:
        prompt = text.startswith(("$ ", "% ", "> "))
        line = text[2:] if prompt else text
        if (block.fence.lower() in SHELL_FENCES or prompt) and line and not line.startswith("#"):
            return [(0, line)]
        return []
    found: list[tuple[int, str]] = []
    spans = list(_CODE_SPAN.finditer(text))
    for span in spans:
        inner = span.group(2).strip().removeprefix("$ ")
        words = inner.split()
        if words and PurePosixPath(words[0]).name in SHELL_PROGRAMS:
            found.append((span.start(), inner))
    for match in _PROSE_COMMAND.finditer(text):
        if not any(span.start() <= match.start() < span.end() for span in spans):
            found.append((match.start(), text[match.start() :].split(". ")[0][:MAX_MATCH_CHARS]))
    return found


def _flags_of(relative: str, text: str, allowed: set[str]) -> list[tuple[ContentFlag, tuple[str, str, str, str]]]:
    """Every flag of a file's text with its identity (category, rule, matched text, block text)."""
    found = []
    for block in _blocks(text):
        hits: list[tuple[int, str, str, str]] = []
        for category, rule, pattern in FLAG_RULES:
            hits += [(m.start(), category, rule, m.group(0)) for m in pattern.finditer(block.text)]
        for offset, command in _commands(block):
            if any(program not in allowed for program in command_programs(command)):
                hits.append((offset, "shell", "shell-command", command))
        for offset, category, rule, matched in hits:
            flag: ContentFlag = {
                "file": relative,
                "line": block.line_at(offset),
                "category": category,
                "rule": rule,
                "text": _clip(matched),
            }
            found.append((flag, (category, rule, _normal(matched), _normal(block.text))))
    return found


def _programs_in(text: str) -> set[str]:
    """The programs the commands of a text start (what the incumbent skill already runs)."""
    return {
        program for block in _blocks(text) for _, command in _commands(block) for program in command_programs(command)
    }


def review_overlay(
    files: Sequence[tuple[str, bytes]], incumbent: Mapping[str, bytes | None], task_tools: Sequence[str] = ()
) -> ContentReview:
    """Review every overlay file (overlay-relative path, bytes) against the incumbent file at the same path
    (`incumbent_files`; None for a new file). ``task_tools`` are the task's own programs (`task_programs`): a
    command that starts one of them, or one the incumbent file already runs, is not flagged."""
    refusals: list[ContentRefusal] = []
    flags: list[ContentFlag] = []
    for relative, payload in files:
        text = payload.decode("utf-8", errors="replace")
        before_bytes = incumbent.get(relative)
        before = None if before_bytes is None else before_bytes.decode("utf-8", errors="replace")
        refusals += _refusals(relative, text, before)
        allowed = set(task_tools) | _programs_in(before or "")
        known = {identity for _, identity in _flags_of(relative, before or "", allowed)}
        seen: set[tuple[str, str, str, str]] = set()
        for flag, identity in _flags_of(relative, text, allowed):
            if identity in known or identity in seen:
                continue
            seen.add(identity)
            flags.append(flag)
    order = {category: index for index, category in enumerate(FLAG_CATEGORIES)}
    flags.sort(key=lambda flag: (flag["file"], flag["line"], order[flag["category"]], flag["rule"]))
    refusals.sort(key=lambda refusal: (refusal["file"], refusal["line"], refusal["rule"]))
    return ContentReview(refusals=refusals, flags=flags)


def incumbent_files(files: Sequence[tuple[str, bytes]], skills_root: Path) -> dict[str, bytes | None]:
    """Each overlay file's incumbent bytes (its `<skills_root>/<skill>/<rest>`), None where the incumbent has none."""
    found: dict[str, bytes | None] = {}
    for relative, _ in files:
        path = Path(skills_root) / skill_relative(relative)
        found[relative] = (
            read_regular_file(path, MAX_TOTAL_BYTES, what=f"incumbent skill file {path}", error=OverlayError)
            if path.is_file() and not path.is_symlink()
            else None
        )
    return found


# ─── Reporting a review ─────────────────────────────────────────────────────


def review_record(review: ContentReview, task_tools: Sequence[str], diff: str) -> ContentReviewRecord:
    return {
        "rules": RULES_VERSION,
        "task_tools": sorted(task_tools),
        "flags": list(review.flags),
        "diff_sha256": hashlib.sha256(diff.encode("utf-8")).hexdigest(),
    }


def refusal_line(refusal: ContentRefusal) -> str:
    return f"{refusal['file']}:{refusal['line']}: {refusal['rule']}: {refusal['reason']} ({refusal['text']!r})"


def flag_line(flag: ContentFlag) -> str:
    return f"{flag['file']}:{flag['line']}: [{flag['category']}] {flag['rule']}: {flag['text']!r}"


def refuse_content(review: ContentReview, where: str) -> None:
    """Raise OverlayError naming every refusal (file, line, rule, reason) of the overlay at ``where``."""
    if review.refusals:
        raise OverlayError(
            f"overlay {where} adds content a candidate may never add (it runs or grants privileges when the skill "
            "loads):\n"
            + "\n".join(f"  {refusal_line(refusal)}" for refusal in review.refusals)
            + "\nRemove it from the overlay: a candidate may only change what the skill's text tells the model."
        )


def flag_categories(flags: Iterable[ContentFlag]) -> list[str]:
    """The categories of ``flags``, in `FLAG_CATEGORIES` order."""
    present = {flag["category"] for flag in flags}
    return [category for category in FLAG_CATEGORIES if category in present]


def unaccepted_categories(flags: Iterable[ContentFlag], accepted: Iterable[str]) -> list[str]:
    """The flag categories among ``flags`` the user has not accepted (`evolution.accept_flags`)."""
    allowed = set(accepted)
    return [category for category in flag_categories(flags) if category not in allowed]


def flag_warnings(flags: Sequence[ContentFlag], accepted: Iterable[str], where: str) -> list[str]:
    """One warning naming the flags of the overlay at ``where`` whose category the config does not accept."""
    missing = unaccepted_categories(flags, accepted)
    if not missing:
        return []
    shown = [flag_line(flag) for flag in flags if flag["category"] in missing]
    more = f"; and {len(shown) - 5} more" if len(shown) > 5 else ""
    return [
        f"overlay {where} carries content flags ({', '.join(missing)}): {'; '.join(shown[:5])}{more}. It runs, but "
        f"the gate will not promote it unless evolution.accept_flags lists {', '.join(missing)}"
    ]


def overlay_diff(files: Sequence[tuple[str, bytes]], incumbent: Mapping[str, bytes | None], skills_root: str) -> str:
    """The candidate's whole unified diff against the incumbent, per overlay file, under the canonical skill paths
    (`<skills_root>/<skill>/<rest>`, as a promotion writes them); an empty string when nothing differs."""
    chunks: list[str] = []
    for relative, payload in files:
        target = (PurePosixPath(skills_root) / skill_relative(relative)).as_posix()
        before = incumbent.get(relative)
        old = [] if before is None else before.decode("utf-8", errors="replace").splitlines(keepends=True)
        new = payload.decode("utf-8", errors="replace").splitlines(keepends=True)
        lines = list(
            difflib.unified_diff(
                old, new, fromfile="/dev/null" if before is None else f"a/{target}", tofile=f"b/{target}", n=3
            )
        )
        if lines:
            chunks.append(f"diff --git a/{target} b/{target}\n")
            chunks += [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines]
    return "".join(chunks)
