import pytest

from search_spaces import grid_space, mixed_space


@pytest.fixture
def grid():
    return grid_space()


@pytest.fixture
def mixed():
    return mixed_space()
