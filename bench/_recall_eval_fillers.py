"""Templated background memories for the recall evaluation set (see _recall_eval_build.py).

These are the only templated texts in the set: small talk between the people of
the hand-written dialogues, routine ATP bookkeeping records, and routine vault
notes (meeting minutes, reading list). No query points at them and none of them
answers a query; they make the corpus bigger and noisier, as a real store is.
Seeded and deterministic: the same list every run.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

__all__ = ["make"]

N_CONVERSATION = 380
N_ATP = 260
N_VAULT = 250

# (dialogue, speakers, [(session, date), ...]) as in the hand-written sources.
DIALOGUES = [
    ("maya-leo", ("Maya", "Leo"), [(1, "2026-01-11"), (2, "2026-02-02"), (3, "2026-03-14"), (4, "2026-04-20"), (5, "2026-06-07"), (6, "2026-10-19")]),
    ("sam-assistant", ("Sam", "Assistant"), [(1, "2026-02-09"), (2, "2026-02-23"), (3, "2026-03-16"), (4, "2026-04-27")]),
    ("priya-tom", ("Priya", "Tom"), [(1, "2026-01-24"), (2, "2026-02-15"), (3, "2026-03-22"), (4, "2026-05-10"), (5, "2026-08-02"), (6, "2026-11-29")]),
    ("jonas-elif", ("Jonas", "Elif"), [(1, "2026-01-05"), (2, "2026-02-14"), (3, "2026-03-30"), (4, "2026-05-18"), (5, "2026-06-24"), (6, "2026-09-08")]),
    ("noor-assistant", ("Noor", "Assistant"), [(1, "2026-01-08"), (2, "2026-02-19"), (3, "2026-04-12"), (4, "2026-06-30"), (5, "2026-09-14"), (6, "2026-11-30")]),
    ("ana-ben", ("Ana", "Ben"), [(1, "2026-02-01"), (2, "2026-03-08"), (3, "2026-05-17"), (4, "2026-07-05"), (5, "2026-08-16"), (6, "2026-09-27")]),
    ("kenji-rosa", ("Kenji", "Rosa"), [(1, "2026-01-17"), (2, "2026-02-28"), (3, "2026-03-21"), (4, "2026-05-24"), (5, "2026-08-09")]),
    ("dana-assistant", ("Dana", "Assistant"), [(1, "2026-03-03"), (2, "2026-04-14"), (3, "2026-06-02"), (4, "2026-07-21"), (5, "2026-09-01"), (6, "2026-11-24")]),
    ("hugo-sofia", ("Hugo", "Sofia"), [(1, "2026-01-29"), (2, "2026-02-20"), (3, "2026-04-06"), (4, "2026-06-18"), (5, "2026-09-14")]),
]

CHAT_OPEN = [
    "Haha",
    "Oh no",
    "Honestly",
    "Ha, fair",
    "Wait, really?",
    "Okay",
    "Sorry, late reply",
    "Ugh",
    "Aw",
    "Right",
    "Oh nice",
    "Hmm",
]
CHAT_BODY = [
    "that sounds exhausting",
    "I completely forgot to reply to this",
    "I'm half asleep, give me a minute",
    "my phone died in the middle of your message",
    "that is the best thing I've read all day",
    "I laughed out loud on the tram",
    "I had the same thought this morning",
    "I'm not sure I follow, say that again?",
    "we should talk about it properly at the weekend",
    "that makes sense, actually",
    "tell me more when you have a second",
    "I can't believe it's already this late",
    "it's been one of those weeks",
    "I'm stuck in a queue at the post office",
    "I'll call you later tonight",
    "I'm trying to drink more water, it's not going well",
    "the weather here is grim again",
    "I just saw your message, sorry",
]
CHAT_CLOSE = [
    "",
    " Anyway.",
    " Talk soon.",
    " More later!",
    " Speak tomorrow?",
    " 😅",
    " Long story.",
    " Ha.",
]
ASSISTANT_LINES = [
    "Happy to help with that.",
    "Could you say a bit more about what you mean?",
    "That's a good question; it depends on what matters most to you.",
    "Let me know how it goes.",
    "Would a short checklist help?",
    "Thanks for the update.",
    "That sounds like good progress.",
    "I can go through it step by step if you like.",
    "Do you want the short version or the detailed one?",
    "Noted.",
    "Sure, take your time.",
    "Good luck with it.",
]

ATP_GOALS = [
    "g-billing-retry", "g-search-reindex", "g-auth-sso", "g-flaky-ci", "g-pdf-export", "g-rate-limit",
    "g-cli-startup", "g-log-redaction", "g-cache-invalidation", "g-i18n-dates", "g-onboarding-email",
    "g-orders-migration", "g-mobile-offline", "g-image-resize", "g-audit-log", "g-cloud-costs",
    "g-report-schedule", "g-dependency-upgrade", "g-data-export", "g-delivery-eta", "g-typecheck",
    "g-backup-test", "g-dashboard-speed", "g-accessibility", "g-dns-timeouts", "g-worker-oom",
    "g-push-notifications", "g-flag-cleanup", "g-resumable-upload", "g-pricing-test", "g-dependency-cve",
    "g-dev-onboarding", "g-email-bounces", "g-search-typos", "g-k8s-upgrade", "g-docs-refresh",
    "g-lint-config", "g-changelog-bot", "g-test-speed", "g-readme-update",
]
ATP_ROUTINE = [
    ("note", "builder", "CI run {n} passed in {m} minutes on commit {h}."),
    ("note", "builder", "rebased the branch onto main at {h}; no conflicts."),
    ("note", "builder", "pushed {k} small commits; nothing to review yet."),
    ("note", "planner", "heartbeat: goal still in progress, {p}% of the tasks are done."),
    ("note", "planner", "heartbeat: no change since the last update; waiting on review."),
    ("action", "builder", "renamed two helper functions for clarity, no behaviour change (commit {h})."),
    ("action", "builder", "updated the docstrings in the touched modules (commit {h})."),
    ("action", "builder", "re-ran the test suite locally: {n} passed, 0 failed."),
    ("note", "reviewer", "picked up the review; will finish it within {m} hours."),
    ("note", "ops", "lease renewed for another {m} minutes."),
    ("handoff", "builder", "to reviewer: branch {h} is ready for a look, nothing urgent."),
    ("note", "builder", "paused for {m} minutes while the shared runner was busy."),
]

MEETING_TEAMS = ["Platform", "Payments", "Search", "Mobile", "Data", "Support", "Design", "Security"]
MEETING_TOPICS = [
    "sprint board grooming", "holiday cover", "the next demo", "ticket triage", "the hiring pipeline",
    "last week's metrics", "the team retro format", "documentation gaps", "the quarterly goals",
    "conference talks", "the office move", "code review turnaround",
]
BOOKS = [
    ("Designing Data-Intensive Applications", "Martin Kleppmann"),
    ("The Pragmatic Programmer", "Andrew Hunt and David Thomas"),
    ("Accelerate", "Nicole Forsgren"),
    ("Thinking in Systems", "Donella Meadows"),
    ("Working Effectively with Legacy Code", "Michael Feathers"),
    ("The Mythical Man-Month", "Fred Brooks"),
    ("Site Reliability Engineering", "Betsy Beyer et al."),
    ("A Philosophy of Software Design", "John Ousterhout"),
    ("Team Topologies", "Matthew Skelton and Manuel Pais"),
    ("Refactoring", "Martin Fowler"),
]
BOOK_COMMENTS = [
    "chapter {c} is worth rereading", "borrowed from the office shelf", "started it on the train",
    "recommended in the last retro", "finished; notes to follow", "halfway through chapter {c}",
]


def _conversation(rng: random.Random) -> list[tuple[str, str, dict[str, Any]]]:
    out: list[tuple[str, str, dict[str, Any]]] = []
    seen: set[str] = set()
    lines = [
        f"{o} {b[0].upper()}{b[1:]}.{c}" if o.endswith(("?", "!")) else f"{o}, {b}.{c}"
        for o, b, c in itertools.product(CHAT_OPEN, CHAT_BODY, CHAT_CLOSE)
    ]
    rng.shuffle(lines)
    it = iter(lines)
    while len(out) < N_CONVERSATION:
        dialogue, speakers, sessions = rng.choice(DIALOGUES)
        session, date = rng.choice(sessions)
        speaker = rng.choice(speakers)
        text = rng.choice(ASSISTANT_LINES) if speaker == "Assistant" else next(it)
        content = f"{speaker}: {text}"
        key = f"{dialogue}|{content}"
        if content.lower() in seen or key in seen:
            continue
        seen.update({content.lower(), key})
        out.append(("conversation", content, {"speaker": speaker, "dialogue": dialogue, "session": session, "date": date}))
    return out


def _atp(rng: random.Random) -> list[tuple[str, str, dict[str, Any]]]:
    out: list[tuple[str, str, dict[str, Any]]] = []
    seen: set[str] = set()
    while len(out) < N_ATP:
        goal = rng.choice(ATP_GOALS)
        record_type, agent, template = rng.choice(ATP_ROUTINE)
        body = template.format(
            n=rng.randint(40, 900), m=rng.randint(2, 45), h=f"{rng.getrandbits(28):07x}", k=rng.randint(2, 6), p=rng.randint(10, 95)
        )
        label = {"note": "Note", "action": "Action", "handoff": "Handoff"}[record_type]
        content = f"Goal: {goal}. {label} ({agent}): {body}"
        if content in seen:
            continue
        seen.add(content)
        out.append(("atp", content, {"record_type": record_type, "goal_id": goal, "agent": agent}))
    return out


def _vault(rng: random.Random) -> list[tuple[str, str, dict[str, Any]]]:
    out: list[tuple[str, str, dict[str, Any]]] = []
    seen: set[str] = set()
    while len(out) < N_VAULT:
        if rng.random() < 0.8:
            team = rng.choice(MEETING_TEAMS)
            day = f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}"
            a, b = rng.sample(MEETING_TOPICS, 2)
            title = f"{team} weekly sync {day}"
            body = f"Talked about {a} and {b}. No decisions; follow-ups in the team board."
            path = f"meetings/{team.lower()}-{day}.md"
            kind = "meeting"
        else:
            book, author = rng.choice(BOOKS)
            comment = rng.choice(BOOK_COMMENTS).format(c=rng.randint(2, 14))
            who = rng.choice(["Priya", "Tom", "Anika", "Ben", "Mara", "the user", "Karim", "Dewi"])
            title = f"Reading list ({who}): {book}"
            body = f"{author}; {comment}."
            path = f"reading/{book.lower().replace(' ', '-')}-{len(out)}.md"
            kind = "reading"
        content = f"{title}\n{body}"
        if title in seen:
            continue
        seen.add(title)
        out.append(("vault", content, {"type": kind, "path": path}))
    return out


def make() -> list[tuple[str, str, dict[str, Any]]]:
    """The filler memories as (source, content, metadata), in a fixed order."""
    rng = random.Random(20261201)
    return _conversation(rng) + _atp(rng) + _vault(rng)
