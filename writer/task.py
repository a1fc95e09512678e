"""What one writer call sends (DESIGN §3.2): the chat's prompt, the writer view, the task.

The call opens with the system prompt and tools last recorded for the job's
chat, so it reads the prefix the chat's turns already cached; then the writer
view up to the node, stopping at the first unwritten line; then the task with
its ruler and input.  Several jobs may share one call, each answered in its
own ``<line id="k">`` tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from endless import prompts
from endless.core.view import tiling
from endless.core.errors import MemoryUseError
from endless.core.view import ViewLine, neutralise
from endless.core.settings import WRITER_REPLY_TOKENS
from endless.llm import tokens
from endless.writer.checks import Verdict
from endless.writer.interface import WriterMemory
from endless.writer.queue import Job
from endless.llm.request import Msg, Request, view_message_blocks

WORDS_PER_512 = 70
_TASK_WORDS = re.compile(r"</?input>|Compaction:")
_LINE_TAG = re.compile(r"<line\s+id\s*=\s*[\"']?(\d+)[\"']?\s*>(.*?)(?:</line>|(?=<line\s+id)|\Z)", re.S | re.I)


@dataclass
class JobText:
    """A job as the task shows it, with everything its checks need."""

    job: Job
    key: str  # "1".."6" in a batch
    name: str  # "compress message 41" / "merge lines 40+1 and 41+1"
    input: str
    sources: list[str]


def job_name(job: Job) -> str:
    if job.level == 0:
        return f"compress message {job.index}"
    left, right = tiling.children(job.part)
    return f"merge lines {tiling.name(left)} and {tiling.name(right)}"


def job_input(memory: WriterMemory, job: Job) -> str:
    """What the writer compresses: ``tag: message`` (tool output trimmed), or the two child lines."""
    if job.level == 0:
        stored = memory.message(job.index)
        if stored is None:
            raise MemoryUseError(f"message {job.index} cannot be read from the log")
        return stored.writer_task_input(memory.settings, memory.agent_name)
    left, right = tiling.children(job.part)
    return "\n".join(ViewLine(p, memory.node_text(*p)).render() for p in (left, right))


def job_sources(memory: WriterMemory, job: Job) -> list[str]:
    """Everything a line may draw facts from: its whole message, or a merge's lines and messages."""
    if job.level == 0:
        stored = memory.message(job.index)
        if stored is None:
            return [job_input(memory, job)]
        source = stored.writer_source(memory.settings, memory.agent_name)
        shown = neutralise(source)  # a try may copy what the task showed, "&lt;/input>" and all
        return [source] if shown == source else [source, shown]
    sources = [job_input(memory, job)]
    for message_id in range(tiling.first(job.part), tiling.end(job.part)):
        stored = memory.message(message_id)
        if stored is not None:
            sources.append(stored.writer_source(memory.settings, memory.agent_name))
    return sources


def job_session(memory: WriterMemory, job: Job) -> str | None:
    """The session whose route a job uses: its message's, or a merge's last message's."""
    stored = memory.message(job.index if job.level == 0 else tiling.end(job.part) - 1)
    return None if stored is None else stored.session


def writer_context(memory: WriterMemory, job: Job) -> list[ViewLine]:
    """The writer view up to the node, stopping at the first unwritten line."""
    upto = job.index if job.level == 0 else tiling.end(job.part)
    lines, _ = memory.views.written_prefix(writer=True, upto=upto)
    return lines


def task_input(memory: WriterMemory, job: Job) -> str:
    """The input as the task shows it between its tags: a message holding ``</input>`` cannot end it.

    (A merge's input is two view lines, rendered neutralised already; the
    offline writer reads :func:`job_input`, so what it stores is the text as written.)
    """
    return neutralise(job_input(memory, job)) if job.level == 0 else job_input(memory, job)


def describe(memory: WriterMemory, jobs: list[Job]) -> list[JobText]:
    return [JobText(job, str(k + 1), job_name(job), task_input(memory, job), job_sources(memory, job))
            for k, job in enumerate(jobs)]


def words_for(budget: int) -> int:
    return max(1, budget * WORDS_PER_512 // 512)


def task_text(items: list[JobText], budget: int) -> str:
    ruler = "-" * budget
    words = words_for(budget)
    if len(items) == 1:
        item = items[0]
        if item.job.level == 0:
            return prompts.text("writer/compress.txt").format(job=item.name, budget=budget, words=words,
                                                              ruler=ruler, input=item.input)
        first, last = tiling.first(item.job.part), tiling.end(item.job.part) - 1
        return prompts.text("writer/merge.txt").format(job=item.name, budget=budget, words=words, ruler=ruler,
                                                       input=item.input, first=first, last=last)
    form = "\n".join(f'<line id="{item.key}">…</line>' for item in items)
    jobs = "".join(prompts.text("writer/batch_job.txt").format(key=item.key, job=item.name, input=item.input)
                   for item in items)
    return prompts.text("writer/batch.txt").format(count=len(items), budget=budget, words=words, form=form,
                                                   ruler=ruler, jobs=jobs)


def context_lines(memory: WriterMemory, jobs: list[Job]) -> list[str]:
    """The writer view before the earliest job's node, stopping at the first unwritten line."""
    earliest = min(jobs, key=lambda j: j.index if j.level == 0 else tiling.end(j.part))
    return [line.render() for line in writer_context(memory, earliest)]


def build_request(memory: WriterMemory, items: list[JobText], *, system: str | None, tools: list[dict],
                  budget: int, max_tokens: int = WRITER_REPLY_TOKENS) -> Request:
    """The start of a writer conversation: the view message, then the task as its own message.

    The task is the last message and starts with ``Compaction:``: that is what
    makes a call a writer task, for the model and for anyone reading logs.
    The whole conversation stays within the model's window, its replies and
    retries included (DESIGN §4's invariant holds for writer calls too): the
    writer view's last lines are left out first, then the chat's own prompt
    and tools (the call then reads no cached prefix, but it fits).
    """
    lines = context_lines(memory, [item.job for item in items])
    task = task_text(items, budget)
    window = memory.window
    room = window - max_tokens * len(items) * memory.settings.tries_per_line

    def make(shown: list[str], own: bool) -> Request:
        blocks, whole = view_message_blocks(shown)
        use_chat = system is not None and not own
        return Request(system if use_chat else prompts.text("writer/section.txt"),
                       list(tools) if use_chat else [],
                       [Msg("user", blocks), Msg("user", [task])],
                       view_message=0, view_blocks=whole, tool_choice="none",
                       cache_key=memory.memory_id, max_tokens=max_tokens * len(items))

    request = make(lines, False)
    if tokens.fits(request, room):
        return request
    for own in (False, True):
        left = room - tokens.estimate(make([], own))
        if left >= 0:
            return make(lines[:tokens.lines_within(lines, left)], own)
    return make([], True)  # the task alone: a message's input is trimmed, so this is small


def _in_words(text: str) -> str:
    """``text`` with the task's own tags and marker named in words (a quoted fact may hold them)."""
    words = {"<input>": "the input tag", "</input>": "the closing input tag", "Compaction:": "the task marker"}
    return _TASK_WORDS.sub(lambda m: words[m.group(0)], text)


def feedback(verdict: Verdict, *, budget: int, target: int, cut: str, key: str | None) -> str:
    """The follow-up message asking for a better try of one job.

    It never quotes the task's own tags or marker, so it cannot pass for a
    new task; the checks phrase their details to read inside its sentence.
    """
    only = prompts.text("writer/only_job.txt").format(key=key) if key else ""
    problem = verdict.problem or "malformed"
    if problem == "too_long":
        return prompts.text("writer/too_long.txt").format(only=only, size=verdict.size, budget=budget,
                                                          target=target, cut=cut)
    if problem == "wrong_script":
        return prompts.text("writer/wrong_language.txt").format(only=only, script=_list(verdict.items))
    if problem == "invented":
        return prompts.text("writer/invented.txt").format(only=only, items=_in_words(_list(verdict.items)))
    return prompts.text("writer/malformed.txt").format(only=only, problem=_in_words(verdict.detail or problem))


def _list(items: tuple[str, ...]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def split_reply(reply: str, keys: list[str]) -> dict[str, str]:
    """Each job's try from a reply: by ``<line id>`` tags, else one line per job in order."""
    if len(keys) == 1 and not _LINE_TAG.search(reply):
        return {keys[0]: reply}
    found = {m.group(1): m.group(2).strip() for m in _LINE_TAG.finditer(reply)}
    if found:
        return {key: found.get(key, "") for key in keys}
    pieces = [p for p in reply.strip().split("\n") if p.strip()]
    if len(pieces) == len(keys):
        return dict(zip(keys, pieces))
    return {key: (reply if len(keys) == 1 else "") for key in keys}
