"""package.xml against the code: every ROS package the code imports is a dependency, and the license is shipped."""

import re
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROS_PACKAGES = re.compile(r"^\s*(?:from|import) (rclpy|launch_ros|launch|\w+_msgs|\w+_srvs|\w+_interfaces)\b", re.M)


def test_every_imported_ros_package_is_an_exec_depend():
    declared = {e.text for e in ET.parse(ROOT / "package.xml").getroot().iter("exec_depend")}
    sources = list((ROOT / "predgen_ros").rglob("*.py")) + list((ROOT / "launch").glob("*.py"))
    imported = {m.group(1) for path in sources for m in ROS_PACKAGES.finditer(path.read_text())}
    assert {"rclpy", "std_msgs"} <= imported  # the pattern sees the imports
    assert imported <= declared, f"imported but not in package.xml: {sorted(imported - declared)}"


def test_the_declared_license_is_the_shipped_one():
    license_tag = ET.parse(ROOT / "package.xml").getroot().find("license")
    assert license_tag.text == "Apache-2.0" and license_tag.get("file") == "LICENSE"
    assert "Apache License\n                           Version 2.0" in (ROOT / "LICENSE").read_text()
    assert 'license="Apache-2.0"' in (ROOT / "setup.py").read_text()
