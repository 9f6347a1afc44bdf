"""Unit tests of the plugin's logic, natively: `python3 -m unittest`. The
cases in tests/*.yaml run the built component instead
(`gantry plugin test .`)."""

import unittest

import greeting

PARENT = {"metadata": {"name": "world"}, "spec": {"who": "World"}}


class GreetTest(unittest.TestCase):
    def test_greets_who_the_spec_names(self):
        wanted = greeting.greet(PARENT, {"greeting": "Hi"})
        self.assertEqual(wanted["child"]["metadata"]["name"], "world-greeting")
        self.assertEqual(wanted["child"]["data"], {"message": "Hi, World!"})
        self.assertEqual(wanted["status"], {"message": "Hi, World!"})

    def test_a_parent_without_who_is_invalid_input(self):
        with self.assertRaises(greeting.InvalidInput):
            greeting.greet({"metadata": {"name": "x"}, "spec": {}}, None)

    def test_an_empty_greeting_is_refused(self):
        self.assertEqual(greeting.check_config({"greeting": " "}), "config.greeting must not be empty")
        self.assertIsNone(greeting.check_config({"greeting": "Hi"}))
        self.assertIsNone(greeting.check_config(None))


if __name__ == "__main__":
    unittest.main()
