"""Plausible text for generated activities: organisations, people, subjects, insights."""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["Org", "make_org", "subject", "body_preview", "TOPICS", "NEXT_STEPS"]

_COMPANIES = tuple(
    "acme globex initech umbrella hooli stark wayne tyrell cyberdyne soylent"
    " wonka gringotts oscorp vandelay dunder pied massive aperture blackmesa nakatomi".split()
)
_FIRST = tuple("ana ben chen dana eli fatima gus hana ivan jo kofi lea mo noor".split())
_LAST = ("park", "silva", "okafor", "kim", "novak", "haddad", "berg", "rossi", "tanaka", "diaz", "weber")
_THEMES = ("renewal", "pricing", "onboarding", "security review", "expansion", "support escalation", "pilot")
_SUBJECTS = (
    "{theme} for {company}",
    "Re: {theme} next steps",
    "{company} x us: {theme}",
    "Follow-up on {theme}",
    "Quick question about {theme}",
)
_SENTENCES = (
    "Thanks for the time today.",
    "Attaching the deck we discussed.",
    "Can we move this to next week?",
    "Legal has a few comments on the order form.",
    "The team is excited about the {theme}.",
    "Please find the updated numbers below.",
    "Looping in {person} for visibility.",
    "Let me know what works for your calendar.",
)
TOPICS = ("pricing", "renewal", "onboarding", "security", "legal", "expansion", "support", "churn risk")
NEXT_STEPS = (
    "send proposal",
    "schedule demo",
    "loop in legal",
    "share security questionnaire",
    "book executive sponsor call",
    "send recap",
)


@dataclass(frozen=True)
class Org:
    """A tenant: its id, its own people and its customers' contacts."""

    org_id: str
    company: str
    users: tuple[str, ...]
    contacts: tuple[str, ...]


def _people(rng: random.Random, domain: str, n: int) -> tuple[str, ...]:
    names = {f"{rng.choice(_FIRST)}.{rng.choice(_LAST)}@{domain}" for _ in range(n)}
    return tuple(sorted(names))


def make_org(rng: random.Random, index: int) -> Org:
    """A tenant with a handful of users and customer contacts at several companies."""
    company = _COMPANIES[index % len(_COMPANIES)]
    suffix = "" if index < len(_COMPANIES) else str(index // len(_COMPANIES))
    contacts: tuple[str, ...] = ()
    for customer in rng.sample(_COMPANIES, 3):
        contacts += _people(rng, f"{customer}-corp.example", rng.randint(2, 5))
    return Org(f"org-{index:04d}", company + suffix, _people(rng, f"{company}{suffix}.example", 6), contacts)


def subject(rng: random.Random, org: Org) -> str:
    customer = rng.choice(org.contacts).split("@")[1].split("-")[0].title()
    return rng.choice(_SUBJECTS).format(theme=rng.choice(_THEMES), company=customer)


def body_preview(rng: random.Random, org: Org) -> str:
    parts = rng.sample(_SENTENCES, rng.randint(1, 3))
    person = rng.choice(org.users).split("@")[0].replace(".", " ").title()
    return " ".join(p.format(theme=rng.choice(_THEMES), person=person) for p in parts)
