"""Config and override validation: every bad input is a ConfigError that names the field."""

import pytest

from harness.config import EngineConfig, Overrides, parse_bucket_list
from harness.errors import ConfigError


@pytest.mark.parametrize("raw,expected", [
    (None, None), ("", None), ("128,,256", (128, 256)), ("256,128,128", (128, 256)),
    ("+64", (64,)), ("1_024", (1024,)), (" 128 , 512", (128, 512)),
])
def test_bucket_list_parsing(raw, expected):
    assert parse_bucket_list("SPYRE_ATTN_KV_BUCKETS", raw) == expected


@pytest.mark.parametrize("raw,message", [
    (" ", "' ' is not an integer"), (",", "no bucket sizes"), ("128,abc", "'abc' is not an integer"),
    ("0,128", ">= 1"), ("-64", ">= 1"), ("1.5", "not an integer"),
])
def test_bucket_list_errors_name_the_variable(raw, message):
    with pytest.raises(ConfigError, match="SPYRE_ATTN_KV_BUCKETS") as err:
        parse_bucket_list("SPYRE_ATTN_KV_BUCKETS", raw)
    assert message in str(err.value)


@pytest.mark.parametrize("changes,message", [
    ({"block_size": 96}, "multiple of 64"), ({"block_size": 0}, ">= 1"),
    ({"max_model_len": 0}, "max_model_len must be >= 1"),
    ({"max_num_batched_tokens": 0}, "max_num_batched_tokens"),
    ({"max_num_seqs": -1}, "max_num_seqs"), ({"dtype": "int8"}, "dtype must be one of"),
    ({"num_kv_heads": 2.5}, "must be an integer"), ({"block_size": True}, "must be an integer"),
    ({"max_num_seqs": 16, "max_num_batched_tokens": 15},
     r"max_num_batched_tokens \(15\) must be >= max_num_seqs \(16\)"),
])
def test_engine_config_rejects(changes, message):
    with pytest.raises(ConfigError, match=message):
        EngineConfig(**changes)


def test_engine_config_accepts_non_power_of_two_block_sizes():
    assert EngineConfig(block_size=192).block_size == 192


def test_overrides_validate_on_construction():
    with pytest.raises(ConfigError, match="unknown override 'spyre_attn_kv': not an environ"):
        Overrides.from_env({"spyre_attn_kv": "128"})
    with pytest.raises(ConfigError, match="SPYRE_BATCHED_DECODE='true'"):
        Overrides.from_env({"SPYRE_BATCHED_DECODE": "true"})
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        Overrides.parse(["SPYRE_ATTN_KV_BUCKETS"])
    with pytest.raises(ConfigError, match="SPYRE_ATTN_NUM_SEQS_BUCKETS"):
        Overrides.parse(["SPYRE_ATTN_NUM_SEQS_BUCKETS=4,x"])


def test_overrides_accessors_and_labels():
    ov = Overrides.parse(["SPYRE_ATTN_KV_BUCKETS=8192,128", "SPYRE_BATCHED_DECODE=1"])
    assert ov.kv == (128, 8192) and ov.query is None and ov.batched_decode
    assert ov.label() == "kv=8192,128 batched=1"
    assert not Overrides.parse(["SPYRE_BATCHED_DECODE=0"]).batched_decode
    assert Overrides().label() == "none"
    assert ov.with_env(SPYRE_BATCHED_DECODE="0").batched_decode is False


def test_an_override_given_twice_is_refused_not_overwritten():
    with pytest.raises(ConfigError, match=r"given twice \('128' and '256'\)"):
        Overrides.parse(["SPYRE_ATTN_KV_BUCKETS=128", "SPYRE_ATTN_KV_BUCKETS=256"])
    assert Overrides.parse(["SPYRE_ATTN_KV_BUCKETS=128"]).kv == (128,)


def test_step_bytes_guard_names_the_figure():
    from harness.config import MAX_STEP_BYTES, check_step_bytes
    check_step_bytes(MAX_STEP_BYTES, "here")
    with pytest.raises(ConfigError, match=r"here: a step needs 6.87e\+10 bytes .*64 GiB limit"):
        check_step_bytes(MAX_STEP_BYTES + 1, "here")
