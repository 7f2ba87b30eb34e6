"""Apply a promoted candidate overlay to the repository's working tree, as one transaction.

`skillbench apply RESULTS_DIR` finds the highest generation whose gate promoted every
required candidate arm, re-derives everything the promotion is bound to (the frozen
overlay's digest, the promotion targets and their committed bytes, the current config's
model, effort and gate policy, the experiment's task bindings) and refuses unless the
promotion document matches all of it exactly and is still current
(`validate_promotion_for_apply`). It also reviews the frozen overlay's content again against the
committed incumbent (`experiment.overlayreview`): content a candidate may never add is refused,
the flags must be the ones the promotion recorded, and every flag's category must be accepted by
the current config's `evolution.accept_flags`. `prepare_promotion` does all of that and returns
the write plan with the candidate's whole diff and its flags, which the command prints before
anything is written (`format_review`); `write_prepared` writes it.

The write is compare-and-swap across every target (canonical skill file, then each mirror,
per overlay file): nothing is written unless every target still holds its bound base bytes.
Before anything is staged, a journal (every target's path, mode, original bytes and digest,
candidate digest, and the names of its temporary files) is written and fsynced inside the
repository's git directory (`<git-dir>/skillbench-apply-journal.json`, 0600), where no clone,
pull or checkout ever puts a file. Candidates are then staged beside their targets (original
mode, fsynced) together with a backup of the original, and swapped in one by one. Any failure
rolls every completed swap back in reverse; if the rollback itself fails, a recovery file in the
repository root says which target is in which state and where the backups are. The journal is
removed last, after the temporary files.

A crash (SIGKILL, power loss) can stop the process anywhere; the journal is then still there,
and the next `skillbench apply` first ROLLS THE INTERRUPTED APPLY BACK (`recover_interrupted`):
every target that holds its candidate bytes gets its original bytes back, the temporary files
go, and the command says so, then applies afresh with every check re-run. Rolling back rather
than forward is deliberate: the journal only proves an apply began; finishing it would publish
candidate bytes without re-checking the evidence binding (expiry, config, HEAD) against the
tree as it is now. Nothing is committed.

A journal is trusted only as far as its rules allow, because whoever can write it chooses what
the recovery writes: it must be the harness's own file (a regular file owned by this user, not
writable by others), valid against its schema, and every target must be a Markdown file of an
evolvable skill under `skills.root` or a mirror, reached through real folders, whose original
bytes are the ones HEAD commits at that path, with a mode within 0755 and exactly its own
temporary-file names. A journal that breaks any rule, or a `.skillbench-apply-journal.json` in
the work tree (where earlier versions kept it, and where git can deliver one), stops the command
before anything changes. A target that holds neither its original nor its candidate bytes
(edited after the crash) does too.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import signal
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

from skillbench.base import artifacts, layout
from skillbench.base.errors import SkillbenchError, raised_as
from skillbench.base.records import ContentFlag
from skillbench.decision.gate import across_agents
from skillbench.decision.policy import RECORDED_WHEN_SET, GatePolicy, resolve_policy
from skillbench.decision.promotion import is_promoted
from skillbench.execution import repo
from skillbench.experiment import overlay, overlayreview
from skillbench.experiment.arms import ArmError, incumbent_of, required_candidate_arms

CONFIG_SCHEMA = artifacts.SCHEMA_DIR / "config.schema.json"
MAX_EVIDENCE_SPAN = timedelta(days=90)
CLOCK_SKEW = timedelta(minutes=5)
ORACLE_DIGEST_FIELDS = ("oracle_digest", "oracle_command_digest", "oracle_manifest_digest")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
TEMP_PREFIX = ".skillbench-apply-"
RECOVERY_PREFIX = ".skillbench-apply-recovery-"
# The journal lives in the repository's git directory; the work-tree name is where earlier versions kept it
# and is refused wherever it appears.
JOURNAL_NAME = "skillbench-apply-journal.json"
WORK_TREE_JOURNAL_NAME = ".skillbench-apply-journal.json"
JOURNAL_SCHEMA = "apply-journal/v1"
MAX_JOURNAL_BYTES = 64 * 1024 * 1024
# A recovery restores permission bits within rwxr-xr-x: never setuid, setgid, sticky or group/world write.
RESTORABLE_MODE_BITS = 0o755
TEMP_KINDS = ("candidate", "backup", "restore")
# Test hook: make the apply SIGKILL itself once this many swaps are done (0: after staging, before the first).
CRASH_HOOK_ENV = "SKILLBENCH_APPLY_CRASH_AFTER_SWAP"

Swap = Callable[[Path, Path], None]


class ApplyError(SkillbenchError, ValueError):
    """The promotion cannot be applied (or the apply failed); the message says why and what state the tree is in."""


# ─── Config ─────────────────────────────────────────────────────────────────


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Snakemake's config merge: nested mappings are updated key by key, everything else replaced."""
    merged = dict(base)
    for key, value in override.items():
        merged[key] = (
            _merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
        )
    return merged


def load_config(*paths: Path) -> dict[str, Any]:
    """Read YAML configs (later ones override earlier ones, as with snakemake --configfile) and fill the schema
    defaults exactly as the Snakefile's `validate(...)` does."""
    import yaml
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    from skillbench.base import yamltext

    config: dict[str, Any] = {}
    for path in map(Path, paths):
        try:
            document = yamltext.safe_load(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ApplyError(f"config file {path} does not exist; pass --configfile") from exc
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ApplyError(f"config file {path} cannot be read as YAML: {exc}") from exc
        if not isinstance(document, dict):
            raise ApplyError(f"config file {path} must hold a mapping at the top level")
        config = _merge(config, document)
    named = ", ".join(map(str, paths))
    try:
        validate(config, str(CONFIG_SCHEMA), set_default=True)
    except WorkflowError as exc:
        raise ApplyError(f"config file {named} does not match schemas/config.schema.json: {exc}") from exc
    return config


# ─── Finding the promoted generation ────────────────────────────────────────


def promoted_generation(results_dir: Path) -> tuple[int, Path]:
    """(N, gen<N> folder) of the highest generation whose promotion.json promotes every decision."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise ApplyError(f"results folder {results_dir} does not exist")
    generations = []
    for entry in results_dir.iterdir():
        number = layout.generation_of_folder(entry.name)
        if number is not None and entry.is_dir() and not entry.is_symlink():
            generations.append((number, entry))
    for number, folder in sorted(generations, reverse=True):
        path = Path(layout.promotion(results_dir, number))
        if not path.is_file():
            continue
        with raised_as(ApplyError, artifacts.ArtifactError):
            document = artifacts.read_json(path)
        if isinstance(document, dict) and is_promoted(document):
            return number, folder
    raise ApplyError(f"no promoted generation in {results_dir}")


# ─── Validation ─────────────────────────────────────────────────────────────


def _same(left: Any, right: Any) -> bool:
    """Equality that does not let True stand in for 1 (or False for 0)."""
    return left == right and isinstance(left, bool) == isinstance(right, bool)


def _parse_timestamp(text: Any, field: str) -> datetime:
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError as exc:
        raise ApplyError(f"promotion {field} is not an ISO-8601 timestamp: {text!r}") from exc
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ApplyError(f"promotion {field} must include a timezone (got {text!r})")
    return moment


def _check_selected_tasks(selected_tasks: list[dict[str, Any]]) -> None:
    if not selected_tasks:
        raise ApplyError("promotion binding has no selected tasks")
    for task in selected_tasks:
        name = task.get("id", "?") if isinstance(task, dict) else "?"
        if not isinstance(task, dict) or any(
            not isinstance(task.get(field), str) or not SHA256.match(task[field]) for field in ORACLE_DIGEST_FIELDS
        ):
            raise ApplyError(f"promotion binding task {name} is missing hidden-oracle digests")
        files = task.get("oracle_files")
        if not isinstance(files, list) or not files:
            raise ApplyError(f"promotion binding task {name} is missing hidden-oracle files")
        for item in files:
            size = item.get("size") if isinstance(item, dict) else None
            if (
                not isinstance(item, dict)
                or not isinstance(item.get("target"), str)
                or not item["target"]
                or not isinstance(item.get("sha256"), str)
                or not SHA256.match(item["sha256"])
                or not isinstance(size, int)
                or isinstance(size, bool)
                or size < 0
            ):
                raise ApplyError(f"promotion binding task {name} has malformed hidden-oracle file evidence")


def validate_promotion_for_apply(
    promotion: dict[str, Any],
    *,
    overlay_digest: str,
    benchmark_model: str,
    effort: str | None,
    proposer_model: str | None,
    candidate_origin: str,
    selected_tasks: list[dict[str, Any]],
    target_base_digests: dict[str, str],
    required_candidate_arms: list[str],
    pairs: list[tuple[str, str]],
    policy: GatePolicy,
    now: datetime | None = None,
) -> None:
    """Raise ApplyError unless ``promotion`` is complete, current, promotes every required arm, and is
    bound to exactly these values (the caller's freshly derived ones, never the document's own)."""
    with raised_as(ApplyError, artifacts.ArtifactError):
        artifacts.validate(promotion, "promotion", source="promotion document")
    if promotion["run_status"] != "complete":
        raise ApplyError(f"promotion run_status is {promotion['run_status']!r}; only a complete run can be applied")
    _check_selected_tasks(selected_tasks)

    required = list(required_candidate_arms)
    if [candidate for _, candidate in pairs] != required:
        raise ApplyError(f"candidate pairs {list(pairs)} do not list the required candidate arms {required} in order")
    _check_binding(
        promotion,
        {
            "benchmark_model": benchmark_model,
            "effort": effort,
            "proposer_model": proposer_model,
            "candidate_origin": candidate_origin,
            "candidate_overlay_digest": overlay_digest,
            "required_candidate_arms": required,
            "selected_tasks": list(selected_tasks),
            "target_base_digests": dict(target_base_digests),
        },
        policy,
    )
    _check_evidence_window(promotion, datetime.now(UTC) if now is None else now)
    _check_decisions(promotion["decisions"], required, {candidate: incumbent for incumbent, candidate in pairs}, policy)
    _check_across_agents(promotion, policy)


def _check_binding(promotion: dict[str, Any], expected: dict[str, Any], policy: GatePolicy) -> None:
    for field, value in expected.items():
        if promotion[field] != value:
            raise ApplyError(f"promotion binding mismatch for {field}")
    bound_policy = promotion["policy"]
    if any(key not in bound_policy or not _same(bound_policy[key], value) for key, value in policy.as_dict().items()):
        raise ApplyError("promotion binding mismatch for policy")
    # A key recorded only when set away from its default binds too: a document that set it must match the config.
    defaults = resolve_policy(None)
    for key in RECORDED_WHEN_SET:
        if not _same(bound_policy.get(key, getattr(defaults, key)), getattr(policy, key)):
            raise ApplyError(f"promotion binding mismatch for policy ({key})")


def _check_evidence_window(promotion: dict[str, Any], current: datetime) -> None:
    """The evidence was generated no later than now (within clock skew), spans a sane window, and has not expired."""
    generated_at = _parse_timestamp(promotion["generated_at"], "generated_at")
    expires_at = _parse_timestamp(promotion["evidence_expires_at"], "evidence_expires_at")
    if current.tzinfo is None or current.utcoffset() is None:
        raise ApplyError("the current time must be timezone-aware")
    if generated_at > current + CLOCK_SKEW:
        raise ApplyError(f"promotion evidence was generated in the future ({promotion['generated_at']})")
    if expires_at <= generated_at or expires_at - generated_at > MAX_EVIDENCE_SPAN:
        raise ApplyError(
            f"promotion evidence window {promotion['generated_at']} .. {promotion['evidence_expires_at']} is invalid "
            f"(it must end after it starts and last at most {MAX_EVIDENCE_SPAN.days} days)"
        )
    if current > expires_at:
        raise ApplyError(
            f"promotion evidence has expired (at {promotion['evidence_expires_at']}); "
            "rerun the benchmark to gather fresh evidence"
        )


def _check_decisions(
    decisions: list[dict[str, Any]], required: list[str], paired_incumbent: dict[str, str], policy: GatePolicy
) -> None:
    """One decision per required candidate arm, in order, each paired as configured, promoting, on the policy's
    metric."""
    decided: list[str] = []
    for decision in decisions:
        candidate = decision["candidate_arm"]
        if candidate not in paired_incumbent:
            raise ApplyError(f"unrelated promotion decision: {candidate}")
        if candidate in decided:
            raise ApplyError(f"duplicate promotion decision: {candidate}")
        decided.append(candidate)
    if decided != required:
        raise ApplyError(f"promotion decisions {decided} do not cover exactly the required candidate arms {required}")
    for decision in decisions:
        candidate = decision["candidate_arm"]
        if decision["incumbent_arm"] != paired_incumbent[candidate]:
            raise ApplyError(
                f"promotion decision for {candidate} pairs it with {decision['incumbent_arm']}, "
                f"not {paired_incumbent[candidate]}"
            )
        # Under across_agents any, a pair that is no worse may keep its own incumbent while another agent's promotes.
        no_worse = policy.across_agents == "any" and decision["decision"] == "keep_incumbent"
        if decision["decision"] != "promote" and not (no_worse and decision.get("no_worse") is True):
            reasons = "; ".join(decision["reasons"][:3])
            raise ApplyError(f"candidate arm {candidate} is not promotable: {decision['decision']} ({reasons})")
        if decision["metric"] != policy.metric:
            raise ApplyError(
                f"promotion decision metric mismatch for {candidate}: {decision['metric']} (policy: {policy.metric})"
            )


def _check_across_agents(promotion: dict[str, Any], policy: GatePolicy) -> None:
    """The verdict across agents, recomputed from the decisions under the policy, promotes and matches the
    document's (a document whose per-agent verdicts were edited, or that predates them under ``any``, is refused)."""
    recomputed = across_agents(promotion["decisions"], [], policy)
    if recomputed["decision"] != "promote":
        raise ApplyError(f"the candidate is not promotable across agents: {recomputed['reason']}")
    stored = promotion.get("agents")
    if stored is None:
        if policy.across_agents == "all":
            return
        raise ApplyError("promotion.json has no verdict across agents; regrade it with `skillbench gate`")
    verdicts = [(v["candidate_arm"], v["verdict"]) for v in stored.get("verdicts", [])]
    if stored.get("decision") != "promote" or verdicts != [
        (v["candidate_arm"], v["verdict"]) for v in recomputed["verdicts"]
    ]:
        raise ApplyError("promotion.json's verdicts across agents do not follow from its decisions")


# ─── Loading and cross-checking the generation's artifacts ──────────────────


def _read(path: Path, kind: str) -> dict[str, Any]:
    with raised_as(ApplyError, artifacts.ArtifactError):
        return artifacts.read_artifact(path, kind)


def _expected_proposer(record: dict[str, Any], config: dict[str, Any]) -> str | None:
    if record["candidate_origin"] == "manual-initial-overlay":
        if record["proposer_model"] is not None:
            raise ApplyError("overlay.json: a manual-initial-overlay candidate cannot name a proposer_model")
        return None
    expected = config.get("evolution", {}).get("proposer_model") or config["model"]["name"]
    if record["proposer_model"] != expected:
        raise ApplyError(
            f"overlay.json: the candidate was proposed by {record['proposer_model']!r}, but the config's "
            f"proposer model (evolution.proposer_model, else model.name) is {expected!r}"
        )
    return expected


def _candidate_pairs(config: dict[str, Any], touched: list[str]) -> list[tuple[str, str]]:
    """(incumbent, candidate) pairs the current config requires for these skills, as the pipeline derives them."""
    from skillbench.experiment.overlay import OverlayError

    try:
        candidates = required_candidate_arms(config, set(touched), "the promoted overlay")
    except (ArmError, KeyError, OverlayError) as exc:
        raise ApplyError(f"config arms: {exc}") from exc
    return [(incumbent_of(arm), arm) for arm in candidates]


def _repository_root(repository: Path) -> Path:
    root = Path(repository).expanduser().absolute()
    if not root.is_dir():
        raise ApplyError(f"repository {root} is not a folder")
    try:
        top = repo.checked(repo.host_git(root), "rev-parse", "--show-toplevel").strip()
    except repo.GitError as exc:
        raise ApplyError(f"{root} is not a git repository: {exc}") from exc
    if Path(top).resolve() != root.resolve():
        raise ApplyError(f"{root} is not the top of its git repository ({top}); pass --repository {top}")
    return root.resolve()


def _check_target_path(root: Path, target: str) -> Path:
    pure = PurePosixPath(target)
    if pure.is_absolute() or not pure.parts or ".." in pure.parts:
        raise ApplyError(
            f"promotion target {target} is not a path inside the repository; "
            "check skills.root and skills.mirrors in the config"
        )
    here = root
    for part in pure.parts[:-1]:
        here = here / part
        kind = artifacts.path_kind(here)
        if kind != "folder":
            raise ApplyError(
                f"promotion target folder {here} does not exist"
                if kind == "missing"
                else f"promotion target {target} passes through {here}, which is not a real folder"
            )
    path = root / target
    kind = artifacts.path_kind(path)
    if kind != "file":
        problem = "does not exist in the working tree" if kind == "missing" else "is not a regular file"
        raise ApplyError(f"promotion target {target} {problem}")
    return path


@dataclass(frozen=True)
class PreparedApply:
    """A promotion that passed every check, ready to write: the generation, the repository root, the write plan
    (target, candidate bytes, base digest), the candidate's whole diff against the committed incumbent, its
    content flags and the categories the config accepts."""

    generation: int
    root: Path
    plan: list[tuple[str, bytes, str]]
    diff: str
    flags: list[ContentFlag]
    accepted: list[str]


def prepare_promotion(
    results_dir: Path, *, repository: Path, config: dict[str, Any], now: datetime | None = None
) -> PreparedApply:
    """Every check of an apply, nothing written: the promotion's binding (`validate_promotion_for_apply`) and the
    frozen overlay's content review against the committed incumbent (`_check_content`).

    ``config`` is the validated config with defaults filled (``load_config``)."""
    results_dir = Path(results_dir)
    generation, _ = promoted_generation(results_dir)
    promotion = _read(Path(layout.promotion(results_dir, generation)), "promotion")
    record = _read(Path(layout.overlay(results_dir, generation)), "overlay")
    bindings = _read(Path(layout.bindings(results_dir)), "task-bindings")
    for index, task in enumerate(bindings["tasks"]):
        with raised_as(ApplyError, artifacts.ArtifactError):
            artifacts.validate(task, "task-binding", source=f"{layout.bindings(results_dir)} tasks[{index}]")
    if record["generation"] != generation:
        raise ApplyError(
            f"{layout.overlay(results_dir, generation)} names generation {record['generation']}, not {generation}"
        )

    skills = config["skills"]
    files = _frozen_overlay(
        Path(layout.frozen_overlay(results_dir, generation)), list(skills["evolvable"]), record, promotion
    )
    touched = sorted(overlay.touched_skills(files))
    if record["touched_skills"] != touched:
        raise ApplyError(f"overlay.json touched_skills {record['touched_skills']} differ from the overlay's {touched}")
    pairs = _candidate_pairs(config, touched)
    derived = [list(pair) for pair in pairs]
    if derived != record["pairs"] or record["required_candidate_arms"] != [candidate for _, candidate in pairs]:
        raise ApplyError(
            f"overlay.json pairs {record['pairs']} differ from the candidate arms the current config "
            f"derives for skills {touched}: {derived} (were arms or selected_arms changed?)"
        )
    targets = _checked_targets(files, skills, record)
    root = _repository_root(repository)
    base_digests = _base_digests(root, targets, record)

    try:
        policy = resolve_policy(config.get("gate"))
    except ValueError as exc:
        raise ApplyError(f"config gate: {exc}") from exc
    validate_promotion_for_apply(
        promotion,
        overlay_digest=overlay.digest(files),
        benchmark_model=config["model"]["name"],
        effort=config["model"]["effort"],
        proposer_model=_expected_proposer(record, config),
        candidate_origin=record["candidate_origin"],
        selected_tasks=bindings["tasks"],
        target_base_digests=base_digests,
        required_candidate_arms=[candidate for _, candidate in pairs],
        pairs=pairs,
        policy=policy,
        now=now,
    )
    # The incumbent as committed: _base_digests just checked every target's work-tree bytes against HEAD.
    with raised_as(ApplyError, overlay.OverlayError):
        incumbent = overlayreview.incumbent_files(files, root / skills["root"])
    accepted = list(config["evolution"].get("accept_flags") or [])
    flags = _check_content(files, incumbent, record, promotion, accepted)
    return PreparedApply(
        generation=generation,
        root=root,
        plan=_write_plan(files, skills, targets, base_digests),
        diff=overlayreview.overlay_diff(files, incumbent, skills["root"]),
        flags=flags,
        accepted=accepted,
    )


def _check_content(
    files: list[tuple[str, bytes]],
    incumbent: dict[str, bytes | None],
    record: dict[str, Any],
    promotion: dict[str, Any],
    accepted: list[str],
) -> list[ContentFlag]:
    """The overlay's content review, run again on the frozen bytes against the committed incumbent (with the task
    tools freeze_overlay recorded): nothing refused, the flags exactly those promotion.json recorded, and each
    flag's category accepted by the current config. Returns the flags."""
    tools = (record.get("content_review") or {}).get("task_tools", [])
    review = overlayreview.review_overlay(files, incumbent, tools)
    if review.refusals:
        lines = "; ".join(overlayreview.refusal_line(refusal) for refusal in review.refusals)
        raise ApplyError(f"the promoted overlay adds content a candidate may never add: {lines}")
    recorded = promotion.get("content_review")
    if recorded is None:
        if review.flags:
            raise ApplyError(
                "promotion.json records no content review but the overlay carries content flags; regrade the "
                "generation (`skillbench gate`) so the flags are weighed"
            )
    elif recorded["flags"] != review.flags:
        raise ApplyError(
            "the content flags promotion.json records differ from a fresh review of the frozen overlay against the "
            "committed incumbent (was the document edited, or the incumbent changed?); regrade the generation"
        )
    missing = overlayreview.unaccepted_categories(review.flags, accepted)
    if missing:
        raise ApplyError(
            f"the promoted overlay carries content flags of categories the config does not accept "
            f"({', '.join(missing)}): "
            + "; ".join(overlayreview.flag_line(flag) for flag in review.flags if flag["category"] in missing)
            + ". Read them; add the categories to evolution.accept_flags only if you accept that text"
        )
    return review.flags


def write_prepared(prepared: PreparedApply, *, swap: Swap = os.replace) -> list[str]:
    """Write a prepared promotion as one transaction; return the written repository-relative paths."""
    return write_transaction(prepared.root, prepared.plan, swap=swap)


def apply_promotion(
    results_dir: Path, *, repository: Path, config: dict[str, Any], now: datetime | None = None, swap: Swap = os.replace
) -> list[str]:
    """Write the promoted generation's frozen overlay into ``repository``'s working tree; return the written
    repository-relative paths (per overlay file: the canonical skill file, then each mirror).

    ``config`` is the validated config with defaults filled (``load_config``). ``swap(source, target)``
    atomically replaces ``target`` by ``source``; it is used for every swap and every rollback restore.
    """
    return write_prepared(prepare_promotion(results_dir, repository=repository, config=config, now=now), swap=swap)


def _frozen_overlay(
    frozen: Path, evolvable: list[str], record: dict[str, Any], promotion: dict[str, Any]
) -> list[tuple[str, bytes]]:
    """The frozen overlay's files, only if they are still exactly what overlay.json and promotion.json record."""
    try:
        files = overlay.overlay_files(frozen, evolvable)
    except (ValueError, OSError, RuntimeError) as exc:
        raise ApplyError(f"frozen overlay {frozen} is not a valid overlay for the current config: {exc}") from exc
    actual = overlay.digest(files)
    if actual != record["digest"] or actual != promotion["candidate_overlay_digest"]:
        raise ApplyError(
            f"frozen overlay was tampered with: {frozen} now has digest {actual}; overlay.json records "
            f"{record['digest']} and promotion.json {promotion['candidate_overlay_digest']}"
        )
    if record["files"] != overlay.overlay_summary(files):
        raise ApplyError(f"frozen overlay was tampered with: {frozen} does not match the files in overlay.json")
    return files


def _checked_targets(files: list[tuple[str, bytes]], skills: dict[str, Any], record: dict[str, Any]) -> list[str]:
    """The promotion targets under the current skills config, as overlay.json records them."""
    with raised_as(ApplyError, overlay.OverlayError):
        targets = overlay.promotion_targets(files, skills_root=skills["root"], mirrors=list(skills["mirrors"]))
    if record["targets"] != targets:
        raise ApplyError(
            f"promotion targets {targets} under the current skills.root/skills.mirrors differ from "
            f"those the candidate was benchmarked for ({record['targets']})"
        )
    return targets


def _uncommitted_target(repository: Path, target: str) -> str:
    """Why a promotion target has no committed bytes, naming the repository as a folder (not `.`)."""
    folder = Path(repository).resolve()
    where = f"the git repository {folder} (the folder snakemake runs in)"
    own = (
        "keep skills of your own in a project folder of your own: `skillbench init DIR --skills PATH` makes one "
        '(README, "Your own experiment")'
    )
    if Path(target).parts[:1] == ("..",):
        return (
            f"promotion target {target} lies outside {where}: the skills under test must be committed in it, where "
            f"apply can write them as one transaction; {own}"
        )
    return (
        f"promotion target {target} is not committed at HEAD of {where}: commit the incumbent skill file (and its "
        f"mirrors) there first, or {own}"
    )


def committed_target_digests(repository: Path, targets: list[str]) -> dict[str, str]:
    """SHA-256 of each target's bytes at HEAD; refuse targets that are absent at HEAD or differ on disk.

    `freeze_overlay` records them in overlay.json and `apply` re-checks them before it writes anything."""
    git = repo.host_git(repository)
    digests: dict[str, str] = {}
    drifted: list[str] = []
    for target in targets:
        result = git(["show", f"HEAD:{target}"], capture_stdout_bytes=overlay.MAX_TOTAL_BYTES + 1)
        if not result.ok or result.stdout_capture is None:
            raise overlay.OverlayError(_uncommitted_target(repository, target))
        committed = result.stdout_capture
        digests[target] = hashlib.sha256(committed).hexdigest()
        live = Path(repository) / target
        if live.is_symlink() or not live.is_file() or live.read_bytes() != committed:
            drifted.append(target)
    if drifted:
        raise overlay.OverlayError(
            f"promotion targets differ from HEAD in the working tree: {', '.join(drifted)}; "
            "commit or restore them before benchmarking a candidate"
        )
    return digests


def _base_digests(root: Path, targets: list[str], record: dict[str, Any]) -> dict[str, str]:
    """The targets' committed digests, as overlay.json records them."""
    for target in targets:
        _check_target_path(root, target)
    with raised_as(ApplyError, overlay.OverlayError):
        base_digests = committed_target_digests(root, targets)
    if record["target_base_digests"] != base_digests:
        raise ApplyError(
            "promotion targets changed at HEAD since the candidate was frozen "
            "(overlay.json target_base_digests differ); rerun the benchmark"
        )
    return base_digests


def _write_plan(
    files: list[tuple[str, bytes]], skills: dict[str, Any], targets: list[str], base_digests: dict[str, str]
) -> list[tuple[str, bytes, str]]:
    """(target, candidate bytes, base digest) per target, in the promotion targets' order (the contract)."""
    plan = []
    for relative, content in files:
        rest = overlay.skill_relative(relative)
        for tree in (skills["root"], *skills["mirrors"]):
            target = (PurePosixPath(tree) / rest).as_posix()
            plan.append((target, content, base_digests[target]))
    if [target for target, _, _ in plan] != targets:
        raise ApplyError("internal error: promotion targets and the write plan disagree")
    return plan


# ─── The transaction ────────────────────────────────────────────────────────


@dataclass
class _Slot:
    target: str
    path: Path
    candidate: bytes
    base_digest: str
    original: bytes = b""
    mode: int = 0o644
    staged: Path | None = None
    backup: Path | None = None


def _current(path: Path) -> bytes | None:
    """The file's bytes, or None when it is missing, a symlink, not a regular file or larger than any overlay."""
    try:
        return artifacts.read_regular_file(path, overlay.MAX_TOTAL_BYTES)
    except artifacts.ArtifactError:
        return None


def _state(slot: _Slot) -> str:
    content = _current(slot.path)
    if content is None:
        return "missing"
    if content == slot.original:
        return "original"
    if content == slot.candidate:
        return "candidate"
    return "unknown"


def _temp_path(path: Path, kind: str) -> Path:
    """The fixed name of a target's temporary file, so the journal can name it before it exists."""
    return path.with_name(f"{TEMP_PREFIX}{path.name}.{kind}")


def _stage_file(path: Path, kind: str, content: bytes, mode: int) -> Path:
    """Write `content` to the target's `kind` temporary file beside it (replacing a stale one), fsynced."""
    temp = _temp_path(path, kind)
    try:
        if stat.S_ISDIR(os.lstat(temp).st_mode):
            raise ApplyError(f"{temp} is a folder; remove it and rerun")
        temp.unlink()
    except FileNotFoundError:
        pass
    descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def _fsync_folder(folder: Path) -> None:
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _remove(path: Path | None, problems: list[str]) -> None:
    if path is None:
        return
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        problems.append(f"could not remove {path}: {exc}")


def _prepare(root: Path, plan: list[tuple[str, bytes, str]]) -> list[_Slot]:
    slots: list[_Slot] = []
    drifted: list[str] = []
    for target, candidate, base_digest in plan:
        if any(slot.target == target for slot in slots):
            raise ApplyError(f"promotion target {target} appears twice")
        path = _check_target_path(root, target)
        original = _current(path)
        if original is None:
            raise ApplyError(f"promotion target {target} is not a readable regular file")
        if hashlib.sha256(original).hexdigest() != base_digest:
            drifted.append(target)
        slots.append(_Slot(target, path, candidate, base_digest, original, stat.S_IMODE(os.lstat(path).st_mode)))
    if drifted:
        raise ApplyError(
            f"promotion targets drifted from the bytes the evidence is bound to: {', '.join(drifted)}; "
            "nothing was written (restore or commit them and rerun the benchmark)"
        )
    return slots


def _crash_hook(swaps_done: int) -> None:
    wanted = os.environ.get(CRASH_HOOK_ENV)
    if wanted is not None and wanted.strip() == str(swaps_done):
        os.kill(os.getpid(), signal.SIGKILL)


def write_transaction(repository: Path, plan: list[tuple[str, bytes, str]], *, swap: Swap = os.replace) -> list[str]:
    """Replace every (target, candidate bytes, base sha256) of ``plan`` under ``repository``, or none of them."""
    root = Path(repository)
    refuse_work_tree_journal(root)
    journal = journal_path(root)
    if os.path.lexists(journal):
        raise ApplyError(
            f"an interrupted apply left {journal}; run `skillbench apply` again, which rolls it back first"
        )
    slots = _prepare(root, plan)
    _write_journal(journal, slots)
    _stage_all(journal, slots)
    failure = _swap_all(slots, swap)
    if failure is not None:
        _roll_back(root, journal, slots, swap, failure)
    problems = _remove_temporaries(slots)
    if problems:
        recovery = _write_recovery(root, slots, "temporary files could not be removed", "published", problems)
        raise ApplyError(f"the overlay was applied but temporary files could not be removed; recovery: {recovery}")
    _finish_journal(journal, slots)
    return [slot.target for slot in slots]


def _stage_all(journal: Path, slots: list[_Slot]) -> None:
    """Stage every candidate and a backup of every original beside its target; on failure remove them all."""
    try:
        for slot in slots:
            slot.staged = _stage_file(slot.path, "candidate", slot.candidate, slot.mode)
            slot.backup = _stage_file(slot.path, "backup", slot.original, slot.mode)
        for folder in dict.fromkeys(slot.path.parent for slot in slots):
            _fsync_folder(folder)
    except BaseException as exc:
        problems: list[str] = []
        for slot in slots:
            _remove(_temp_path(slot.path, "candidate"), problems)
            _remove(_temp_path(slot.path, "backup"), problems)
        if not problems:
            _remove(journal, problems)
        if not isinstance(exc, Exception):
            raise
        raise ApplyError(
            f"could not stage the overlay beside its targets ({exc}); nothing was replaced"
            + (f"; {'; '.join(problems)}" if problems else "")
        ) from exc


def _swap_all(slots: list[_Slot], swap: Swap) -> BaseException | None:
    """Swap every staged candidate in, checking each target before and after; return what stopped it, if anything."""
    try:
        _crash_hook(0)
        for number, slot in enumerate(slots, start=1):
            current = _current(slot.path)
            if current is None or hashlib.sha256(current).hexdigest() != slot.base_digest:
                raise ApplyError(f"{slot.target} changed while the overlay was being applied")
            assert slot.staged is not None
            swap(slot.staged, slot.path)
            _crash_hook(number)
            if _current(slot.path) != slot.candidate:
                raise ApplyError(f"{slot.target} does not hold the candidate bytes after its swap")
            if not slot.staged.exists():
                slot.staged = None
        for folder in dict.fromkeys(slot.path.parent for slot in slots):
            _fsync_folder(folder)
        unpublished = [slot.target for slot in slots if _current(slot.path) != slot.candidate]
        if unpublished:
            raise ApplyError(f"targets lost their candidate bytes during the apply: {', '.join(unpublished)}")
    except BaseException as exc:  # every failure, even an interrupt, must roll back first
        return exc
    return None


def _remove_temporaries(slots: list[_Slot]) -> list[str]:
    problems: list[str] = []
    for slot in slots:
        _remove(slot.staged, problems)
        _remove(slot.backup, problems)
    return problems


def _roll_back(root: Path, journal: Path, slots: list[_Slot], swap: Swap, failure: BaseException) -> NoReturn:
    """Undo every swap after ``failure`` and raise it (an ApplyError saying so); a rollback that cannot finish
    leaves a recovery file naming each target's state."""
    rollback_failures = _rollback(slots, swap)
    if not rollback_failures:
        problems = _remove_temporaries(slots)
        if not problems:
            _finish_journal(journal, slots)
        if not isinstance(failure, Exception):
            raise failure
        note = f" (leftover temporary files: {'; '.join(problems)})" if problems else ""
        raise ApplyError(f"overlay apply failed and all replacements were rolled back: {failure}{note}") from failure

    problems = []
    for slot in slots:
        _remove(slot.staged, problems)
        if _state(slot) == "original":
            _remove(slot.backup, problems)
            slot.backup = None
    recovery = _write_recovery(
        root, slots, f"{type(failure).__name__}: {failure}", "rollback-incomplete", rollback_failures + problems
    )
    raise ApplyError(f"overlay apply failed and the rollback was incomplete; recovery: {recovery}") from failure


def _rollback(slots: list[_Slot], swap: Swap) -> list[str]:
    """Restore every swapped target in reverse order; return what could not be restored."""
    failures: list[str] = []
    for slot in reversed(slots):
        current = _current(slot.path)
        if current == slot.original:
            continue
        if current != slot.candidate:
            failures.append(f"{slot.target}: holds neither the original nor the candidate bytes; left untouched")
            continue
        if slot.backup is None or not slot.backup.exists():
            failures.append(f"{slot.target}: its backup is missing")
            continue
        try:
            swap(slot.backup, slot.path)
        except Exception as exc:  # recorded in the recovery file
            failures.append(f"{slot.target}: restoring the backup failed: {type(exc).__name__}: {exc}")
            continue
        if _current(slot.path) != slot.original:
            failures.append(f"{slot.target}: does not hold the original bytes after the restore")
            continue
        if not slot.backup.exists():
            slot.backup = None
    return failures


def _write_recovery(root: Path, slots: list[_Slot], failure: str, transaction_state: str, problems: list[str]) -> Path:
    moment = datetime.now(UTC)
    document = {
        "kind": "skillbench-apply-recovery",
        "created_at": artifacts.utc_timestamp(moment),
        "repository": str(root),
        "failure": failure,
        "transaction_state": transaction_state,
        "problems": problems,
        "targets": [
            {
                "path": slot.target,
                "state": _state(slot),
                "original_sha256": slot.base_digest,
                "candidate_sha256": hashlib.sha256(slot.candidate).hexdigest(),
                "backup": str(slot.backup) if slot.backup is not None and slot.backup.exists() else None,
                "candidate_temp": str(slot.staged) if slot.staged is not None and slot.staged.exists() else None,
            }
            for slot in slots
        ],
        "next_steps": "restore each target whose state is not 'original' (or not 'candidate', if you want the "
        "overlay) from its backup with `mv <backup> <path>`, or with `git checkout -- <path>`; "
        "then delete the leftover .skillbench-apply-* files and this file",
    }
    path = root / f"{RECOVERY_PREFIX}{artifacts.utc_timestamp(moment, timespec='microseconds', for_filename=True)}.json"
    try:
        artifacts.atomic_write_text(path, artifacts.canonical_json(document), mode=0o600)
    except OSError as exc:
        raise ApplyError(
            f"overlay apply failed ({failure}) and the recovery file {path} could not be written "
            f"({exc}); recovery details: {artifacts.compact_json(document)}"
        ) from exc
    return path


# ─── The journal and crash recovery ─────────────────────────────────────────


def journal_path(repository: Path) -> Path:
    """Where apply keeps its journal: inside the repository's git directory, which git never fills from a
    commit. A git directory inside the work tree other than `.git` itself could be a committed folder, so
    it is refused."""
    root = Path(repository).absolute()
    try:
        git_dir = Path(repo.checked(repo.host_git(root), "rev-parse", "--absolute-git-dir").strip())
    except repo.GitError as exc:
        raise ApplyError(f"{root} is not a git repository: {exc}") from exc
    real_root, real_git_dir = root.resolve(), git_dir.resolve()
    if real_git_dir != real_root / ".git" and real_git_dir.is_relative_to(real_root):
        raise ApplyError(
            f"the git directory of {root} is {git_dir}, a folder of its work tree; skillbench apply keeps its "
            "journal in the git directory only when git cannot check files out into it: move the git directory "
            "to .git or outside the work tree"
        )
    return git_dir / JOURNAL_NAME


def refuse_work_tree_journal(root: Path) -> None:
    """Stop when the work tree holds a journal: git can deliver it there, so it proves nothing and is never used."""
    found = Path(root) / WORK_TREE_JOURNAL_NAME
    if not os.path.lexists(found):
        return
    tracked = repo.host_git(Path(root))(["ls-files", "--error-unmatch", "--", WORK_TREE_JOURNAL_NAME]).ok
    where = "is committed to the repository" if tracked else "is in the work tree"
    raise ApplyError(
        f"{found} {where}. skillbench apply keeps its journal in the repository's git directory, where no clone "
        "or pull can put one, so this file was not written by an interrupted apply of this version and is not "
        "used; nothing was changed. Delete it"
        + (" (`git rm` it and find out who committed it)" if tracked else "")
        + ", restore any skill file an old apply left half-written with `git checkout -- <path>`, and rerun"
    )


def _write_journal(journal: Path, slots: list[_Slot]) -> None:
    """Durably record the whole transaction before anything is staged: temp file, fsync, rename, fsync folder."""
    document = {
        "schema": JOURNAL_SCHEMA,
        "created_at": artifacts.utc_timestamp(),
        "targets": [
            {
                "path": slot.target,
                "mode": slot.mode & RESTORABLE_MODE_BITS,
                "original_sha256": slot.base_digest,
                "original_base64": base64.b64encode(slot.original).decode("ascii"),
                "candidate_sha256": hashlib.sha256(slot.candidate).hexdigest(),
                "temporary_files": _temporary_names(slot.path),
            }
            for slot in slots
        ],
    }
    payload = artifacts.canonical_json(artifacts.validate(document, "apply-journal", source=journal))
    _durable_write(journal, payload.encode("utf-8"))


def _temporary_names(path: Path) -> list[str]:
    return [_temp_path(path, kind).name for kind in TEMP_KINDS]


def _durable_write(path: Path, payload: bytes) -> None:
    temp = path.with_name(f"{path.name}.tmp")
    temp.unlink(missing_ok=True)
    descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(descriptor, view) :]
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(temp, path)
    _fsync_folder(path.parent)


def _finish_journal(journal: Path, slots: list[_Slot]) -> None:
    """The transaction is over (published or rolled back) and its temp files are gone: drop the journal last."""
    for folder in dict.fromkeys(slot.path.parent for slot in slots):
        _fsync_folder(folder)
    journal.unlink(missing_ok=True)
    _fsync_folder(journal.parent)


def _owned_by_this_user(info: os.stat_result) -> None:
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise ApplyError(
            f"it is owned by uid {info.st_uid} with mode {stat.S_IMODE(info.st_mode):04o}; skillbench apply writes "
            f"its journal as uid {os.geteuid()}, mode 0600"
        )


def _read_journal(journal: Path) -> dict[str, Any]:
    """The journal document, only if it is this user's own regular file and valid against its schema."""
    fix = (
        "nothing was changed. Restore the skill files with `git checkout -- <path>`, delete the journal and the "
        ".skillbench-apply-* files beside the skill files, and rerun"
    )
    try:
        payload = artifacts.read_regular_file(
            journal, MAX_JOURNAL_BYTES, what="apply journal", error=ApplyError, inspect=_owned_by_this_user
        )
        document = json.loads(payload.decode("utf-8"))
        with raised_as(ApplyError, artifacts.ArtifactError):
            return artifacts.validate(document, "apply-journal", source=journal)
    except (ApplyError, ValueError) as exc:
        raise ApplyError(f"an interrupted apply left {journal}, but it cannot be trusted ({exc}); {fix}") from exc


def skill_file_problem(target: str, skills: dict[str, Any]) -> str | None:
    """Why ``target`` is not a file a recovery may restore (None when it is one): a normalized relative path to
    a Markdown file of an evolvable skill under skills.root or a mirror, with no `..`, `.` or `.git` part."""
    pure = PurePosixPath(target)
    if (
        not target
        or pure.is_absolute()
        or pure.as_posix() != target
        or any(part in ("", ".", "..") or part.casefold() == ".git" for part in pure.parts)
        or any(ord(char) < 32 or char in "\\\x7f" for char in target)
    ):
        return "is not a plain relative path inside the repository"
    trees = [PurePosixPath(tree) for tree in (skills["root"], *skills["mirrors"])]
    for tree in trees:
        if pure.is_relative_to(tree):
            rest = pure.relative_to(tree).parts
            if len(rest) >= 2 and rest[0] in skills["evolvable"] and pure.name.lower().endswith(".md"):
                return None
    return (
        f"is not a Markdown file of an evolvable skill ({', '.join(skills['evolvable'])}) under skills.root or "
        f"skills.mirrors ({', '.join(tree.as_posix() for tree in trees)})"
    )


def _committed_bytes(root: Path, target: str) -> bytes | None:
    shown = repo.host_git(root)(["show", f"HEAD:{target}"], capture_stdout_bytes=overlay.MAX_TOTAL_BYTES + 1)
    return shown.stdout_capture if shown.ok else None


def _recovery_entry(root: Path, journal: Path, index: int, entry: dict[str, Any], skills: dict[str, Any]) -> Path:
    """The target of one journal entry, after every rule a recovery relies on; ApplyError naming the rule."""
    where = f"{journal}: targets[{index}]"
    fix = (
        "nothing was changed. This journal was not written by skillbench apply: delete it, restore the skill "
        "files with `git checkout -- <path>`, and rerun"
    )
    problem = skill_file_problem(entry["path"], skills)
    if problem:
        raise ApplyError(f"{where}.path {entry['path']!r} {problem}; {fix}")
    if entry["mode"] & ~RESTORABLE_MODE_BITS:
        raise ApplyError(
            f"{where}.mode {entry['mode']:04o} has bits a skill file never needs (setuid, setgid, sticky or "
            f"group/world write; a recovery restores at most {RESTORABLE_MODE_BITS:04o}); {fix}"
        )
    path = _check_target_path(root, entry["path"])
    if sorted(entry["temporary_files"]) != sorted(_temporary_names(path)):
        raise ApplyError(
            f"{where}.temporary_files {entry['temporary_files']} are not the target's own temporary files "
            f"{_temporary_names(path)}; {fix}"
        )
    original = base64.b64decode(entry["original_base64"], validate=True)
    if hashlib.sha256(original).hexdigest() != entry["original_sha256"]:
        raise ApplyError(f"{where}: the original bytes of {entry['path']} do not match their digest; {fix}")
    if _committed_bytes(root, entry["path"]) != original:
        raise ApplyError(
            f"{where}: the original bytes of {entry['path']} are not what HEAD commits at that path; a recovery "
            "only restores committed bytes. Nothing was changed: restore the file with `git checkout -- "
            f"{entry['path']}`, delete the journal, and rerun"
        )
    return path


def recover_interrupted(repository: Path, skills: dict[str, Any]) -> str | None:
    """Roll back an apply that a crash interrupted (its journal is still there); say what was done.

    ``skills`` is the config's skills section (root, mirrors, evolvable): the only files a recovery may
    touch. None when there is nothing to recover. Raise ApplyError, changing nothing, when the journal is
    in the work tree, is not this user's, breaks its schema or any rule of `_recovery_entry`, or a target
    holds neither its original nor its candidate bytes.
    """
    root = Path(repository).expanduser().absolute()
    refuse_work_tree_journal(root)
    journal = journal_path(root)
    # A journal whose own write was interrupted never got renamed into place: nothing was staged yet.
    Path(f"{journal}.tmp").unlink(missing_ok=True)
    if not os.path.lexists(journal):
        return None
    document = _read_journal(journal)
    plan = []
    for index, entry in enumerate(document["targets"]):
        path = _recovery_entry(root, journal, index, entry, skills)
        original = base64.b64decode(entry["original_base64"])
        current = _current(path)
        digest = hashlib.sha256(current).hexdigest() if current is not None else None
        if digest == entry["original_sha256"]:
            state = "original"
        elif digest == entry["candidate_sha256"]:
            state = "candidate"
        else:
            state = "unknown"
        plan.append((entry, path, original, state))
    unknown = [entry["path"] for entry, _, _, state in plan if state == "unknown"]
    if unknown:
        raise ApplyError(
            f"an interrupted apply left {journal}, but {', '.join(unknown)} hold(s) neither the original "
            "nor the candidate bytes (edited since?); nothing was changed. Restore them (`git checkout "
            "-- <path>`), then delete the journal and the .skillbench-apply-* files beside the targets"
        )
    restored: list[str] = []
    for entry, path, original, state in plan:
        if state != "candidate":
            continue
        temp = _stage_file(path, "restore", original, entry["mode"])
        os.replace(temp, path)
        if _current(path) != original:
            raise ApplyError(
                f"rolling back the interrupted apply: {entry['path']} does not hold its original bytes "
                f"after the restore; the journal {journal} is kept"
            )
        restored.append(entry["path"])
    removed = 0
    for entry, path, _, _ in plan:
        _fsync_folder(path.parent)
        for name in entry["temporary_files"]:
            temp = path.parent / name
            if artifacts.path_kind(temp) in ("file", "symlink"):
                temp.unlink()
                removed += 1
    for _, path, _, _ in plan:
        _fsync_folder(path.parent)
    journal.unlink()
    _fsync_folder(journal.parent)
    kept = len(plan) - len(restored)
    lines = [
        f"found an interrupted apply (started {document['created_at']}) and ROLLED IT BACK: "
        f"{len(restored)} target(s) restored to their original bytes, {kept} already held them; "
        f"{removed} temporary file(s) removed."
    ]
    lines += [f"  restored {path}" for path in restored]
    return "\n".join(lines)


# ─── Output ─────────────────────────────────────────────────────────────────


def format_review(prepared: PreparedApply) -> str:
    """What the command shows before it writes: the generation, the targets, the content flags (each with whether
    the config accepts its category) and the candidate's whole diff against the committed incumbent."""
    targets = [target for target, _, _ in prepared.plan]
    lines = [
        f"generation {prepared.generation}'s promoted candidate would write {len(targets)} file(s): "
        + ", ".join(targets),
    ]
    if prepared.flags:
        lines.append(
            f"content flags: {len(prepared.flags)}, every category accepted by evolution.accept_flags "
            f"({', '.join(prepared.accepted)}):"
        )
        lines += [f"  {overlayreview.flag_line(flag)}" for flag in prepared.flags]
    else:
        lines.append("content flags: none")
    lines += ["the candidate's whole diff against the committed incumbent:", prepared.diff.rstrip("\n")]
    return "\n".join(lines)


def format_applied(paths: list[str]) -> str:
    lines = [f"applied the promoted overlay to {len(paths)} file(s) in the working tree (nothing was committed):"]
    lines += [f"  {path}" for path in paths]
    lines.append(
        "Next: review `git diff`, run the project's tests, and commit the change citing the "
        "generation's promotion.json."
    )
    return "\n".join(lines)
