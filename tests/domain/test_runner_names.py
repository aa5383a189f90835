"""Runner type <-> ARC scale set: the derivation, the explicit exceptions, and the way back."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from bot.domain.reading.runner_names import (
    RunnerNames,
    ScaleSetName,
    derived_scale_set,
    runner_key,
    scale_set_problem,
)

GPU = "linux.g5.4xlarge.nvidia.gpu"
# Labels as CI fleets write them: letters, digits and the punctuation runs-on labels carry.
labels = st.text(st.sampled_from("abcXYZ019.-_ "), min_size=1, max_size=30)
anything = st.text(max_size=30)


@pytest.mark.parametrize(
    ("runner_type", "scale_set"),
    [
        ("linux.2xlarge", "linux-2xlarge"),
        (GPU, "linux-g5-4xlarge-nvidia-gpu"),
        ("Windows.4XLarge", "windows-4xlarge"),
        ("lf.linux_arm64.m7g", "lf-linux-arm64-m7g"),  # ARC's chart makes `_` a `-` too
        ("mt-l-x86iavx512-8-64", "mt-l-x86iavx512-8-64"),  # already a scale set's name
        ("linux.2xlarge.", "linux-2xlarge"),  # a Kubernetes name ends with a letter or digit
        ("linux..large", "linux--large"),  # one `-` per character, as ARC's chart makes them
        ("linux.größe", "linux-gr--e"),  # only ASCII is lower-cased; the rest is punctuation
        ("...", ""),
    ],
)
def test_a_runner_types_scale_set_is_derived(runner_type: str, scale_set: str) -> None:
    assert derived_scale_set(runner_type) == scale_set


NAMES = RunnerNames(
    {GPU: "gpu-a10g"}, known=["linux.2xlarge", "linux.4xlarge", GPU, "windows.4xlarge"]
)


@pytest.mark.parametrize(
    ("runner_type", "scale_set"),
    [
        ("linux.2xlarge", "linux-2xlarge"),
        (GPU, "gpu-a10g"),  # RUNNER_SCALE_SETS names it
        ("Linux.G5.4xlarge.NVIDIA.gpu", "gpu-a10g"),  # by runner_key, as incidents match
        ("linux.unknown", "linux-unknown"),  # a type the bot does not know: derived
    ],
)
def test_a_runner_types_scale_set_is_explicit_else_derived(
    runner_type: str, scale_set: str
) -> None:
    assert NAMES.scale_set(runner_type) == scale_set


@pytest.mark.parametrize(
    ("series", "runner_type"),
    [
        ("linux-2xlarge", "linux.2xlarge"),
        ("linux-4xlarge", "linux.4xlarge"),
        ("gpu-a10g", GPU),
        # The type's derived name is not its scale set: another set, named as it is.
        ("linux-g5-4xlarge-nvidia-gpu", "linux-g5-4xlarge-nvidia-gpu"),
        ("linux.2xlarge", "linux.2xlarge"),  # an exporter that labels by runner type
        ("mt-l-x86iavx512-8-64", "mt-l-x86iavx512-8-64"),  # a scale set of no known type
        ("", ""),
    ],
)
def test_a_series_is_named_for_the_runner_type_it_serves(series: str, runner_type: str) -> None:
    assert NAMES.runner_type(series) == runner_type


def test_explicit_beats_derived_when_a_set_is_named_for_another_type() -> None:
    names = RunnerNames({"linux.large": "linux-2xlarge"}, known=["linux.2xlarge"])
    assert names.runner_type("linux-2xlarge") == "linux.large"
    assert names.scale_set("linux.2xlarge") == "linux-2xlarge"  # derived, yet not its series


def test_two_types_that_derive_alike_always_give_the_same_one() -> None:
    for known in (["linux.2xlarge", "linux_2xlarge"], ["linux_2xlarge", "linux.2xlarge"]):
        assert RunnerNames(known=known).runner_type("linux-2xlarge") == "linux.2xlarge"


def test_the_table_shows_every_known_type_and_whether_it_is_explicit() -> None:
    assert NAMES.table(["linux.12xlarge", "linux.2xlarge"]) == [
        ScaleSetName(GPU, "gpu-a10g", True),
        ScaleSetName("linux.2xlarge", "linux-2xlarge", False),
        ScaleSetName("linux.4xlarge", "linux-4xlarge", False),
        ScaleSetName("windows.4xlarge", "windows-4xlarge", False),
        ScaleSetName("linux.12xlarge", "linux-12xlarge", False),
    ]
    assert RunnerNames().table() == []


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("linux-2xlarge", ""),
        ("a" * 45, ""),
        ("a" * 46, "longer than the 45 characters"),
        ("GPU-A10G", "not a Kubernetes name"),
        ("linux.2xlarge", ""),  # Kubernetes allows the dots; Helm releases seldom have them
        ("linux_2xlarge", "not a Kubernetes name"),
        ("-linux", "not a Kubernetes name"),
        ("", "not a Kubernetes name"),
    ],
)
def test_a_name_arc_could_not_give_a_scale_set_is_said(name: str, says: str) -> None:
    problem = scale_set_problem(name)
    assert (says in problem) if says else problem == ""


@given(anything)
def test_a_derived_name_is_its_own_scale_set(name: str) -> None:
    derived = derived_scale_set(name)
    assert derived_scale_set(derived) == derived
    assert scale_set_problem(derived) == "" or not derived or len(derived) > 45


@given(st.lists(labels, max_size=6, unique=True), st.data())
def test_every_known_type_round_trips_through_its_scale_set(
    known: list[str], data: st.DataObject
) -> None:
    keys = [runner_key(t) for t in known]
    assume(len(set(keys)) == len(keys) and all(derived_scale_set(t) for t in known))
    explicit_types = data.draw(
        st.lists(st.sampled_from(known), unique=True) if known else st.just([])
    )
    # No label derives to "set-…": `labels` has no s, e or t.
    explicit = {t: f"set-{n}" for n, t in enumerate(explicit_types)}
    names = RunnerNames(explicit, known=known)
    for runner_type in known:
        scale_set = names.scale_set(runner_type)
        assert names.runner_type(scale_set) == runner_type
        assert scale_set == explicit.get(runner_type, derived_scale_set(runner_type))


@given(st.dictionaries(labels, labels, max_size=4), st.lists(labels, max_size=4), anything)
def test_a_series_no_known_type_claims_stays_as_it_is(
    explicit: dict[str, str], known: list[str], series: str
) -> None:
    names = RunnerNames(explicit, known=known)
    claimed = {derived_scale_set(s) for s in explicit.values()} | {
        derived_scale_set(t) for t in known
    }
    assume(derived_scale_set(series) not in claimed)
    assert names.runner_type(series) == series


@given(labels)
def test_an_alerts_label_and_its_derived_scale_set_are_one_runner_type(label: str) -> None:
    assume(derived_scale_set(label))
    assert runner_key(label) == runner_key(derived_scale_set(label))
    assert runner_key(label) == runner_key(label.upper())


def test_an_alerts_scale_set_names_are_renamed_to_the_runner_types_they_serve() -> None:
    names = RunnerNames({"linux.g5.4xlarge.nvidia.gpu": "gpu-a10g"}, known=["linux.2xlarge"])

    renamed = names.renamed({"gpu-a10g": 1, "linux-2xlarge": 2, "linux.2xlarge": 3, "win": 4})

    # The first of two names of one type is kept; a name nothing claims stays as it is.
    assert renamed == {"linux.g5.4xlarge.nvidia.gpu": 1, "linux.2xlarge": 2, "win": 4}
