import os
import unittest

import support  # noqa: F401  (puts the package on sys.path)
from adventuretime import ContractError, artifact_part, committed_parts

from support import TempDir


def contract(d, outputs="rollouts"):
    return {"ADV_RUN": "roll", "ADV_ATTEMPT": "2", "ADV_ARTIFACT_DIR": d, "ADV_OUTPUTS": outputs}


class ArtifactPartTest(unittest.TestCase):
    def test_a_part_appears_whole_under_its_name_and_only_on_success(self):
        with TempDir() as d:
            env = contract(d)
            parts = os.path.join(d, "rollouts", "parts")
            with artifact_part("rollouts", name="shard-00000", env=env) as tmp:
                # While it is written it is hidden: adv exec never ships half a part.
                self.assertTrue(os.path.basename(tmp).startswith("."))
                self.assertEqual(committed_parts("rollouts", env), [])
                with open(os.path.join(tmp, "data.jsonl"), "w") as f:
                    f.write("{}\n")
            with open(os.path.join(parts, "shard-00000", "data.jsonl")) as f:
                self.assertEqual(f.read(), "{}\n")
            with self.assertRaises(RuntimeError):
                with artifact_part("rollouts", name="shard-00001", env=env) as tmp:
                    open(os.path.join(tmp, "half"), "w").close()
                    raise RuntimeError("preempted half way")
            self.assertEqual(os.listdir(parts), ["shard-00000"])
            self.assertEqual(committed_parts("rollouts", env), ["shard-00000"])

    def test_a_committed_part_is_never_written_again(self):
        with TempDir() as d:
            env = contract(d)
            with artifact_part("rollouts", name="p", env=env) as tmp:
                open(os.path.join(tmp, "a"), "w").close()
            with self.assertRaises(FileExistsError):
                with artifact_part("rollouts", name="p", env=env):
                    pass
            self.assertEqual(sorted(os.listdir(os.path.join(d, "rollouts", "parts"))), ["p"])

    def test_names_default_to_unique_time_ordered_ones_and_bad_ones_are_refused(self):
        with TempDir() as d:
            env = contract(d)
            for _ in range(3):
                with artifact_part("rollouts", env=env):
                    pass
            names = committed_parts("rollouts", env)
            self.assertEqual(len(names), 3)
            self.assertTrue(all("-a2-p0-" in n for n in names), names)
            for bad in (".hidden", "a/b", ""):
                with self.assertRaises(ValueError):
                    with artifact_part("rollouts", name=bad, env=env):
                        pass

    def test_an_output_the_run_does_not_declare_is_a_contract_error(self):
        with TempDir() as d:
            with self.assertRaises(ContractError) as e:
                with artifact_part("samples", env=contract(d)):
                    pass
            self.assertIn('output "samples" is not declared by run roll (declared: rollouts)', str(e.exception))
            # Outside adv exec (a laptop) any output is fine.
            with artifact_part("samples", name="x", env={"ADV_ARTIFACT_DIR": d}):
                pass
            self.assertEqual(committed_parts("samples", {"ADV_ARTIFACT_DIR": d}), ["x"])


if __name__ == "__main__":
    unittest.main()
