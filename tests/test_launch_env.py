import pytest

from dpwise.errors import DpwiseError
from dpwise.launch.env import DistEnv


def test_plain_process_is_not_under_a_launcher():
    env = DistEnv.from_environ({})
    assert not env.under_launcher and env.world_size == 1 and env.is_main


def test_torchrun_variables_are_read():
    env = DistEnv.from_environ(
        {
            "TORCHELASTIC_RUN_ID": "abc",
            "RANK": "3",
            "LOCAL_RANK": "1",
            "WORLD_SIZE": "4",
            "LOCAL_WORLD_SIZE": "2",
            "GROUP_RANK": "1",
        }
    )
    assert env.under_launcher and not env.is_main
    assert (env.rank, env.local_rank, env.world_size, env.local_world_size, env.node_rank) == (
        3,
        1,
        4,
        2,
        1,
    )


def test_bad_variable_is_a_clear_error():
    with pytest.raises(DpwiseError, match="RANK='x' is not an integer"):
        DistEnv.from_environ({"TORCHELASTIC_RUN_ID": "a", "RANK": "x"})
