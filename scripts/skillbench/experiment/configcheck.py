"""Experiment configs and the YAML inputs an author writes: checked when the workflow is parsed, one line per mistake.

This module owns
* `validate_config`: the config against `schemas/config.schema.json`, filling the schema's defaults in place (as
  `snakemake.utils.validate(..., set_default=True)` does), with every violation reduced to one line that names the
  key (`unknown key `run`; did you mean `runs`?`). The full jsonschema report goes to a log file, not the terminal.
* `read_yaml`: a YAML file as data, with errors that say what is wrong and where (an undefined alias is not
  "not valid UTF-8").
* `load_config`: config files merged the way `snakemake --configfile` merges them, then validated.
* `design_warnings`: an experiment design that can never promote a candidate (say so before any session).
"""

from __future__ import annotations

import copy
import difflib
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema import Draft202012Validator, validators

from skillbench.base import yamltext
from skillbench.base.artifacts import ArtifactError, load_schema

CONFIG_KIND = "config"
MAX_LINES = 6


class ConfigError(ArtifactError):
    """The config is invalid. `str()` is the short message; `detail` is jsonschema's full report."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


def _with_defaults(validator_class: type[Any]) -> type[Any]:
    """A validator that fills `default` values of `properties` before checking them (jsonschema FAQ pattern).

    Defaults are deep-copied: the schema is cached, and a shared default dict filled in one config would leak into the
    next one."""
    check_properties = validator_class.VALIDATORS["properties"]

    def properties(validator: Any, props: dict[str, Any], instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        if isinstance(instance, dict):
            for name, subschema in props.items():
                if isinstance(subschema, dict) and "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from check_properties(validator, props, instance, schema)

    return validators.extend(validator_class, {"properties": properties})


_DefaultingValidator = _with_defaults(Draft202012Validator)


def _key_path(parts: Iterable[str | int]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def closest_name(word: str, choices: list[str]) -> str | None:
    """The valid name a typo most likely meant, or None."""
    matches = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if matches:
        return matches[0]
    # A prefix (`run` → `runs`, `gen` → `generations`) is the commonest typo and scores low on ratio alone.
    prefixed = [choice for choice in choices if choice.startswith(word) or word.startswith(choice)]
    return prefixed[0] if len(prefixed) == 1 else None


def _unknown_keys(error: jsonschema.ValidationError) -> list[str] | None:
    """One line per unexpected key of an `additionalProperties: false` violation, or None for other errors."""
    if error.validator != "additionalProperties" or not isinstance(error.instance, dict):
        return None
    known = list(error.schema.get("properties", {})) if isinstance(error.schema, Mapping) else []
    where = _key_path(error.absolute_path)
    lines = []
    for key in sorted(set(error.instance) - set(known), key=str):
        full = f"{where}.{key}" if where else str(key)
        hint = closest_name(str(key), known)
        suggestion = f"; did you mean `{(where + '.') if where else ''}{hint}`?" if hint else ""
        valid = f" (valid keys{' under `' + where + '`' if where else ''}: {', '.join(known)})" if not hint else ""
        lines.append(f"unknown key `{full}`{suggestion}{valid}")
    return lines


def _leaf(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """The most specific sub-error of an anyOf/oneOf failure."""
    return jsonschema.exceptions.best_match(error.context) if error.context else error


def _looks_typed(value: Any) -> bool:
    """A string that YAML would have read as a number or boolean had it not been forced to text."""
    if not isinstance(value, str):
        return False
    try:
        return not isinstance(yamltext.safe_load(value), str)
    except yaml.YAMLError:
        return False


def describe(error: jsonschema.ValidationError, what: str = "config") -> list[str]:
    """jsonschema's error as short lines naming the key, for a user who wrote YAML, not a schema."""
    unknown = _unknown_keys(error)
    if unknown is not None:
        return [f"{what}: {line}" for line in unknown]
    error = _leaf(error)
    where = _key_path(error.absolute_path) or "(top level)"
    line = f"{what}: key `{where}`: {error.message}"
    expected = error.schema.get("type") if isinstance(error.schema, dict) else None
    if error.validator == "type" and expected in ("integer", "number", "boolean") and _looks_typed(error.instance):
        line += (
            " — a value nested in `--config key={...}` is read as text by Snakemake; put the value in a YAML file "
            "and pass it with --configfile"
        )
    return [line]


def schema_problems(
    document: Any, kind: str, *, fill_defaults: bool = False, what: str | None = None
) -> tuple[list[str], str]:
    """(short lines, full report) for every violation of `kind`'s schema; fills defaults in place when asked."""
    schema = load_schema(kind)
    validator = (_DefaultingValidator if fill_defaults else Draft202012Validator)(schema)
    errors = sorted(validator.iter_errors(document), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    lines: list[str] = []
    for error in errors:
        for line in describe(error, what or kind):
            if line not in lines:
                lines.append(line)
    return lines, "\n\n".join(str(error) for error in errors)


def validate_config(
    config: dict[str, Any], *, source: str = "config", log_path: str | Path | None = None, verbose: bool = False
) -> dict[str, Any]:
    """Fill the schema's defaults into `config` and check it; raise ConfigError with one line per mistake.

    The full jsonschema report (schema excerpts included) is written to `log_path` when given, and added to the
    message only when `verbose`."""
    lines, detail = schema_problems(config, CONFIG_KIND, fill_defaults=True, what=source)
    if not lines:
        return config
    shown = lines[:MAX_LINES]
    if len(lines) > MAX_LINES:
        shown.append(f"… and {len(lines) - MAX_LINES} more")
    if log_path is not None:
        try:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            Path(log_path).write_text("\n".join(lines) + "\n\n" + detail + "\n", encoding="utf-8")
            shown.append(f"(the full schema report is in {log_path}; the keys are described in config/README.md)")
        except OSError:
            pass
    if verbose:
        shown += ["", detail]
    raise ConfigError("\n".join(shown), detail)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    if isinstance(exc, yaml.composer.ComposerError) and "undefined alias" in problem:
        return (
            f"{where}{problem} — an alias `*name` must come after the anchor `&name` it repeats, in the same "
            "file (anchors and aliases are allowed)"
        )
    return f"{where}{context + ': ' if context else ''}{problem}"


def read_yaml(path: str | Path, *, what: str = "YAML file") -> Any:
    """Parse a YAML file (anchors and aliases allowed); raise ArtifactError naming file, line and problem."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise ArtifactError(f"{path}: {what} does not exist") from exc
    except OSError as exc:
        raise ArtifactError(f"{path}: {what} cannot be read: {exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ArtifactError(
            f"{path}: {what} is not UTF-8 text (byte 0x{raw[exc.start]:02x} on line {line}); save it as UTF-8"
        ) from exc
    try:
        return yamltext.safe_load(text)
    except yaml.YAMLError as exc:
        raise ArtifactError(f"{path}: {what} is not valid YAML: {_yaml_problem(exc)}") from exc


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Snakemake's --configfile merge: mappings merge key by key, everything else (lists too) is replaced."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def merged_files(*paths: str | Path) -> dict[str, Any]:
    """Config files merged (later ones over earlier ones, as with snakemake --configfile), not yet checked."""
    config: dict[str, Any] = {}
    for path in map(Path, paths):
        document = read_yaml(path, what="config file")
        if document is None:
            continue
        if not isinstance(document, dict):
            raise ConfigError(f"{path}: a config file must hold a mapping of keys at the top level")
        config = merge(config, document)
    return config


def load_config(*paths: str | Path, log_path: str | Path | None = None) -> dict[str, Any]:
    """Read config files (later ones merged over earlier ones, as with snakemake --configfile), fill defaults, check."""
    source = str(paths[-1]) if paths else "config"
    return validate_config(merged_files(*paths), source=source, log_path=log_path)


def most_runs(runs: int | dict[str, Any]) -> int:
    """The most runs per (task, arm) a design can reach: `runs` itself, or a sequential design's `max`."""
    return runs["max"] if isinstance(runs, dict) else runs


def design_warnings(config: dict[str, Any], task_count: int) -> list[str]:
    """Why this design can never promote a candidate, or promotes only if nothing at all goes wrong (one line each).

    Only generations > 0 are gated; a plain sweep cannot promote by design and gets no warning."""
    if not config["evolution"]["generations"]:
        return []
    gate = config["gate"]
    warnings = []
    runs, min_runs = most_runs(config["runs"]), gate["min_runs"]
    if runs < min_runs:
        warnings.append(
            f"runs is {runs} but gate.min_runs is {min_runs}: no candidate can ever be promoted (every task needs "
            f"{min_runs} valid runs per arm); set runs to at least {min_runs}, or lower gate.min_runs"
        )
    ratio = gate["min_gated_task_ratio"]
    needed = math.ceil(ratio * task_count - 1e-9)
    # A ratio below 1 reads as "some tasks may fail"; with this few tasks it tolerates none.
    if task_count and 0 < ratio < 1 and needed >= task_count:
        warnings.append(
            f"only {task_count} task(s) selected for gate.min_gated_task_ratio {ratio:g}: every one of them must carry "
            "quality signal, so a single task that neither arm resolves blocks any promotion; add tasks (or lower "
            "gate.min_gated_task_ratio)"
        )
    return warnings


GENERATIONS_ADVICE = "Raise `evolution.generations` to continue the chain."


def next_step(config: dict[str, Any], task_count: int, decisions: list[dict[str, Any]]) -> str:
    """The advice after a run that promoted nothing, matching why: the test that decided and the change that would
    let it decide (more tasks, more runs, a margin). More generations are advised only when a new candidate is the
    remedy (the candidate was shown no cheaper, or worse). `decisions` are the last generation's gate decisions
    (promotion.json's, with their reasons and tests)."""
    gate = config["gate"]
    if most_runs(config["runs"]) < gate["min_runs"]:
        return (
            f"With runs: {most_runs(config['runs'])} no candidate can be promoted "
            f"(gate.min_runs is {gate['min_runs']}), so "
            f"more generations would not help: set `runs` to at least {gate['min_runs']} (or lower "
            "`gate.min_runs`) and run again."
        )
    text = " ".join(reason for decision in decisions for reason in decision.get("reasons", []))
    if "cut short" in text:
        caps = [cap for cap in ("budget.max_sessions", "budget.max_usd") if cap in text] or ["the budget"]
        return (
            f"The budget ({' and '.join(f'`{cap}`' for cap in caps)}) stopped the sequential design before the gate "
            "could decide: raise it (or lower `runs.max`) and run the same command again; finished cells are kept "
            "and only the missing batches run."
        )
    if "evidence base is too thin" in text or "no task supplied quality signal" in text:
        return (
            f"Too few of the {task_count} task(s) carried quality signal (tasks neither arm resolves are not "
            "gated): add tasks the arms can resolve, or lower `gate.min_gated_task_ratio`."
        )
    if "excluded runs" in text or "different valid run counts" in text:
        return (
            "Some runs were excluded (session, infra or cleanup errors; see the report's error kinds): fix the "
            "cause and run the same command again, which redoes only what is missing."
        )
    for decision in decisions:
        advice = _design_advice(decision)
        if advice:
            return advice
    return GENERATIONS_ADVICE


def _design_advice(decision: dict[str, Any]) -> str | None:
    """What would let the gate decide a candidate it kept out for want of evidence (None: the evidence spoke, or
    the rule does not test, and a new candidate is the remedy)."""
    tests = decision.get("tests")
    if decision.get("decision") == "promote" or decision.get("rule") != "noise_aware" or not tests:
        return None
    cost, quality, design = tests["cost"], tests["quality"], tests["design"]
    if quality["conclusion"] == "worse" or cost["conclusion"] in ("not_cheaper", "below_floor"):
        return None  # the evidence ruled the candidate out: another candidate is the remedy
    advice = []
    if cost["conclusion"] in ("inconclusive", "not_computable"):
        advice.append(_cost_advice(cost, design))
    if quality["conclusion"] in ("inconclusive", "not_computable"):
        advice.append(_quality_advice(quality, design))
    if not advice:
        return None
    return " ".join(advice) + " More generations would run the same tests on the same design again."


def _cost_advice(cost: dict[str, Any], design: dict[str, Any]) -> str:
    tasks = cost["tasks"]
    if cost["conclusion"] == "not_computable" or tasks < 3:
        return (
            f"The cost test decided: over {tasks} gated task(s) it has {max(tasks - 1, 0)} degree(s) of freedom (the "
            "task is the unit of replication), too few to tell a saving: add tasks (`skillbench estimate` sizes the "
            "design)."
        )
    detectable = f"; this design detects a {cost['mde_pct']:.1f}% saving 80% of the time" if cost["mde_pct"] else ""
    return (
        f"The cost test decided: not enough tasks or runs to tell (estimate {cost['estimate_pct']:.1f}%, interval "
        f"{cost['ci_low_pct']:.1f}% to {cost['ci_high_pct']:.1f}%{detectable}): add tasks (each one adds a degree "
        f"of freedom; {design['text']} now) or runs (`runs`); `skillbench estimate` sizes the design."
    )


def _quality_advice(quality: dict[str, Any], design: dict[str, Any]) -> str:
    margin, difference = quality["margin_pct"], quality["difference_pct"]
    low, high = quality["ci_low_pct"], quality["ci_high_pct"]
    if difference is None or low is None or high is None:
        return (
            "The resolution test decided: it could not compare the arms' resolution; add tasks both arms can "
            "resolve, or runs (`runs`)."
        )
    counts = (
        f"candidate {quality['candidate_resolved']}/{quality['candidate_runs']}, incumbent "
        f"{quality['incumbent_resolved']}/{quality['incumbent_runs']}"
    )
    shown = (
        f"The resolution test decided: {counts} cannot show the resolution within the {margin:g}-point margin "
        f"(gate.quality_margin_pct; the interval reaches {low:+.1f} points)"
    )
    wider = f"set `gate.quality_margin_pct` to {math.ceil(-low)} or more"
    room = difference + margin
    if room <= 0:
        return (
            f"{shown}, and the difference itself ({difference:+.1f}) is past it: only a wider margin decides: {wider}."
        )
    half_width = (high - low) / 2
    runs = quality["candidate_runs"]
    needed = math.ceil(runs * (half_width / room) ** 2)
    tasks = max(design["tasks"], 1)
    per_task = math.ceil(needed / tasks)
    return (
        f"{shown}: about {needed} runs per arm would show it ({per_task} per task over these {tasks} task(s): "
        f"`runs: {per_task}`), or {wider}; more tasks help the same way."
    )


def did_you_mean(word: str, choices: list[str]) -> str:
    """`; did you mean `x`?` for a typo of one of ``choices``, else the list of them."""
    hint = closest_name(word, choices)
    return f"; did you mean `{hint}`?" if hint else f" (known: {', '.join(choices) or 'none'})"


def _distinct_scripts(document: Any) -> Any:
    """The script with each task script that YAML aliases share kept once (under its first task): a suite whose
    tasks share scripts through `&anchor`/`*alias` is validated in the time of its distinct scripts, and a mistake
    in a shared script is named once, at the first task that uses it."""
    if not isinstance(document, dict) or not isinstance(document.get("tasks"), dict):
        return document
    seen: set[int] = set()
    distinct = {}
    for task, script in document["tasks"].items():
        if isinstance(script, dict | list):
            if id(script) in seen:
                continue
            seen.add(id(script))
        distinct[task] = script
    return {**document, "tasks": distinct}


def _named_task_problems(
    path: str | Path,
    scripted: dict[str, Any],
    replayed: set[str],
    suite_tasks: list[str],
    arm_roles: dict[str, list[str]],
    replayable: list[str] | None,
) -> list[str]:
    """The script's task ids and roles that name nothing, and replayed tasks without a reference solution."""
    problems: list[str] = []
    known_roles = sorted({role for roles in arm_roles.values() for role in roles})
    for task, roles in scripted.items():
        if task not in suite_tasks:
            problems.append(f"{path}: task `{task}` is not in the task suite{did_you_mean(task, suite_tasks)}")
        elif task in replayed:
            if replayable is not None and task not in replayable:
                problems.append(
                    f"{path}: task `{task}`: `replay: solution` needs the task's reference `solution: {{patch: …}}` or "
                    "`{ref: …}`; give it one, or write the task's steps per role"
                )
        else:
            problems += [
                f"{path}: task `{task}`: role `{role}` is not a session role of any arm"
                f"{did_you_mean(role, known_roles)}"
                for role in roles or {}
                if role not in known_roles
            ]
    return problems


def check_model_script(
    path: str | Path,
    *,
    suite_tasks: list[str],
    selected_tasks: list[str],
    arm_roles: dict[str, list[str]],
    selected_arms: list[str],
    needs_proposer: bool,
    replayable: list[str] | None = None,
) -> dict[str, Any]:
    """Read and check a scripted-model script before any job; return it, or raise ArtifactError listing every mistake.

    Checks the schema, that every task id and role it names exists (suite tasks; roles of the config's arms), and that
    every selected task has steps for every role of the selected arms (and `proposer` steps when a proposer runs). A
    task the script replays (`{replay: solution}`) plays every role, and needs a reference solution (a patch or a
    ref: `replayable`, None when not known).
    """
    document = read_yaml(path, what="model script")
    from skillbench.experiment.modelscript import shared_step_problems

    problems, _detail = schema_problems(_distinct_scripts(document), "model-script", what=str(path))
    problems = problems or shared_step_problems(document, str(path))
    if problems:
        raise ArtifactError("\n".join(problems[:MAX_LINES]))
    scripted = document.get("tasks") or {}
    replayed = {task for task, roles in scripted.items() if isinstance(roles, dict) and "replay" in roles}
    problems += _named_task_problems(path, scripted, replayed, suite_tasks, arm_roles, replayable)
    for task in selected_tasks:
        if task in replayed:
            continue
        for arm in selected_arms:
            for role in arm_roles[arm]:
                if role not in (scripted.get(task) or {}):
                    line = f"{path}: task `{task}` has no steps for role `{role}` (a session of arm `{arm}`)"
                    if line not in problems:
                        problems.append(line)
    if needs_proposer and not document.get("proposer"):
        problems.append(f"{path}: no `proposer` steps, but this experiment runs a proposer session")
    if problems:
        more = [f"… and {len(problems) - MAX_LINES} more"] if len(problems) > MAX_LINES else []
        shown = problems[:MAX_LINES] + more
        raise ArtifactError("\n".join(shown))
    return document
