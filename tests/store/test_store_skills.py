"""Ask skills in the state database (migration 12): the fields' limits, who sees and who manages
which skill, slugs unique per catalog, and how ``/slug`` resolves."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from codesearch.errors import InsufficientPermissions, InvalidArgument
from codesearch.store import Conflict, NotFound, Store
from codesearch.store.secret import ENV_VAR
from codesearch.store.skills import MAX_PERSONAL, check_skill, normalize_slug
from tests.store.test_store import Clock

ENV = {ENV_VAR: "test-secret"}
T0 = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def store(tmp_path):
    s = Store.open(tmp_path, environ=ENV, clock=Clock(T0))
    yield s
    s.close()


def fields(slug="review", **over):
    return {"name": "Review", "slug": slug, "description": "Review a change", "instructions": "Check tests.", **over}


@pytest.mark.parametrize(
    "typed, slug",
    [("review", "review"), ("Review PR", "review-pr"), ("/deep--research/", "deep-research"), ("  a_b  ", "a-b"),
     ("x" * 70, "x" * 64), ("---", "")],
)
def test_slugs_are_normalized_as_sourcebot_does(typed, slug):
    assert normalize_slug(typed) == slug


@pytest.mark.parametrize(
    "over, problem",
    [
        ({"name": ""}, "name: Name is required."),
        ({"name": "n" * 81}, "name: must be 80 characters or fewer"),
        ({"slug": "!!!"}, "slug: Command is required."),
        ({"description": "d" * 501}, "description: must be 500 characters or fewer"),
        ({"instructions": "i" * 20001}, "instructions: must be 20,000 characters or fewer"),
        ({"instructions": None}, "instructions: Instructions are required."),
        ({"name": 5}, "name: must be a string."),
    ],
)
def test_each_bad_field_is_named(over, problem):
    with pytest.raises(InvalidArgument) as e:
        check_skill(fields(**over))
    assert problem in str(e.value)


def test_limits_are_inclusive():
    ok = check_skill(fields(name="n" * 80, slug="s" * 64, description="d" * 500, instructions="i" * 20000))
    assert len(ok["instructions"]) == 20000


def test_who_sees_and_who_manages(store):
    owner, alice, bob = (store.create_user(e).id for e in ("o@x.org", "a@x.org", "b@x.org"))
    mine = store.create_skill(alice, "personal", fields("mine"))
    shared = store.create_skill(alice, "shared", fields("team"))
    # (actor, is_owner, skill, may see, may manage)
    table = [
        (alice, False, mine, True, True),
        (bob, False, mine, False, False),
        (owner, True, mine, False, False),  # a personal skill is its user's alone
        (alice, False, shared, True, True),
        (bob, False, shared, True, False),
        (owner, True, shared, True, True),
    ]
    for actor, is_owner, skill, sees, manages in table:
        seen = [s.id for s in store.list_skills(actor)]
        assert (skill.id in seen) is sees, (actor, skill.slug)
        if not sees:
            with pytest.raises(NotFound):
                store.update_skill(skill.id, actor, is_owner, {"name": "x"})
            with pytest.raises(NotFound):
                store.delete_skill(skill.id, actor, is_owner)
        elif not manages:
            with pytest.raises(InsufficientPermissions):
                store.update_skill(skill.id, actor, is_owner, {"name": "x"})
            with pytest.raises(InsufficientPermissions):
                store.delete_skill(skill.id, actor, is_owner)
        else:
            assert store.update_skill(skill.id, actor, is_owner, {"name": f"by {actor}"}).name == f"by {actor}"
    assert store.delete_skill(shared.id, owner, True).slug == "team"
    assert [s.slug for s in store.list_skills(bob)] == []


def test_slugs_are_unique_per_catalog_and_personal_wins(store):
    alice, bob = store.create_user("a@x.org").id, store.create_user("b@x.org").id
    store.create_skill(alice, "shared", fields("review", instructions="shared text"))
    with pytest.raises(Conflict, match="/review already exists"):
        store.create_skill(bob, "shared", fields("review"))
    store.create_skill(alice, "personal", fields("review", instructions="alice text"))
    store.create_skill(bob, "personal", fields("review", instructions="bob text"))  # another user's catalog
    assert store.resolve_skill(alice, "review").instructions == "alice text"
    assert store.resolve_skill(None, "review").instructions == "shared text"
    assert store.resolve_skill(alice, "missing") is None
    other = store.create_skill(alice, "personal", fields("other"))
    with pytest.raises(Conflict):
        store.update_skill(other.id, alice, False, {"slug": "review"})
    moved = store.update_skill(other.id, alice, False, {}, scope="shared")
    assert (moved.scope, [(s.slug, s.scope) for s in store.list_skills(bob)]) == (
        "shared", [("review", "personal"), ("other", "shared"), ("review", "shared")])


def test_a_user_has_a_bounded_number_of_skills(store):
    alice = store.create_user("a@x.org").id
    for i in range(MAX_PERSONAL):
        store.create_skill(alice, "personal", fields(f"s{i}"))
    with pytest.raises(Conflict, match=f"at most {MAX_PERSONAL} personal skills"):
        store.create_skill(alice, "personal", fields("one-more"))


def test_a_deleted_user_takes_their_skills(store):
    store.create_user("o@x.org")  # the first user is the owner, who cannot be removed
    alice, bob = store.create_user("a@x.org").id, store.create_user("b@x.org").id
    store.create_skill(alice, "shared", fields("team"))  # as in Sourcebot: a creator's skills go with them
    store.remove_user(alice)
    assert store.list_skills(bob) == []
