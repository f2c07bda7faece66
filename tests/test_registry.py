import pytest

from vla.registry import Registry


def test_register_get_and_errors_name_the_known_entries():
    reg: Registry[type] = Registry("widget")

    @reg.register("a")
    class A: ...

    assert reg.get("a") is A and "a" in reg and reg.names() == ["a"] and list(reg) == ["a"]
    with pytest.raises(KeyError, match="unknown widget 'b'; registered: a"):
        reg.get("b")
    with pytest.raises(KeyError, match="already registered"):
        reg.register("a")(type("B", (), {}))
