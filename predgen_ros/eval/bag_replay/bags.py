"""rosbag2 bags (MCAP) written and read with the pure-Python `rosbags` library.

Messages are stored as CDR bytes with their type definitions embedded, so
`ros2 bag info` / `ros2 bag play` of a ROS 2 distro open the bags, and rclpy's
`serialize_message` / `deserialize_message` convert them without a typestore.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# Topics of an evaluation bag and their types.
USER_TOPICS = {
    "asr/partial": "std_msgs/msg/String",
    "asr/final": "std_msgs/msg/String",
    "asr/speech_end": "std_msgs/msg/Header",  # stamp = end of the last voiced audio, frame_id = utterance number
    "asr/voice": "std_msgs/msg/Header",  # frame_id = start, resumed, more or end (nodes/messages.py)
    "audio/user": "std_msgs/msg/Int16MultiArray",  # 16 kHz mono chunks of the user's speech
    "eval/turn": "std_msgs/msg/String",  # JSON: qid, reference text, true start and end of speech
}
GRAPH_TOPICS = {
    "predgen/candidate": "std_msgs/msg/String",
    "tts/say": "std_msgs/msg/String",
    "predgen/response": "std_msgs/msg/String",
    "predgen/latency": "diagnostic_msgs/msg/DiagnosticArray",
    "tts/first_audio": "std_msgs/msg/Header",
    "robot_speaking": "std_msgs/msg/Bool",
}


class BagError(RuntimeError):
    """A bag that is missing, truncated or not a rosbag2 bag; the message says which."""


@dataclass(frozen=True)
class BagMessage:
    topic: str
    msgtype: str
    t_ns: int
    raw: bytes  # CDR


@dataclass(frozen=True)
class QuestionMarker:
    """An eval/turn message: one question of the bag and when its speech truly began and ended."""

    qid: str
    text: str
    t_start_ns: int
    t_end_ns: int
    pauses: list = ()  # make-bag --hesitations: [start_ns, length_s] of each pause inside the question


def question_markers(messages: list[BagMessage]) -> list[QuestionMarker]:
    """The eval/turn markers among `messages`, in bag order."""
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import String

    return [QuestionMarker(**json.loads(deserialize_message(m.raw, String).data)) for m in messages if m.topic == "eval/turn"]


def first_questions(
    messages: list[BagMessage], markers: list[QuestionMarker], limit: int | None
) -> tuple[list[BagMessage], list[QuestionMarker]]:
    """The messages and markers of the first `limit` questions (all of them for None)."""
    if limit and limit < len(markers):
        return [m for m in messages if m.t_ns < markers[limit].t_start_ns], markers[:limit]
    return messages, markers


def _typestore():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


def write_bag(path: str | Path, messages: Iterable[BagMessage]) -> None:
    """A new MCAP bag at `path` (a folder, as rosbag2 makes) holding `messages`."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    path = Path(path)
    if path.exists():
        raise BagError(f"{path} already exists: remove it or choose another --out")
    typestore = _typestore()
    connections = {}
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        for message in sorted(messages, key=lambda m: m.t_ns):
            if message.topic not in connections:
                connections[message.topic] = writer.add_connection(f"/{message.topic}", message.msgtype, typestore=typestore)
            writer.write(connections[message.topic], message.t_ns, message.raw)


def read_bag(path: str | Path, topics: Iterable[str] | None = None) -> list[BagMessage]:
    """All messages (of `topics`, if given) in time order; BagError when unreadable."""
    from rosbags.rosbag2 import Reader

    wanted = {f"/{t.lstrip('/')}" for t in topics} if topics else None
    try:
        with Reader(_bag_folder(path)) as reader:
            connections = [c for c in reader.connections if wanted is None or c.topic in wanted]
            return [
                BagMessage(c.topic.lstrip("/"), c.msgtype, t, bytes(raw))
                for c, t, raw in reader.messages(connections=connections)
            ]
    except BagError:
        raise
    except Exception as err:  # rosbags raises several kinds for damaged files
        raise BagError(
            f"{path}: cannot read the bag ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else 'damaged'})"
        ) from None


def bag_summary(path: str | Path) -> str:
    """What `ros2 bag info` prints: files, duration, time range, messages per topic."""
    from rosbags.rosbag2 import Reader

    folder = _bag_folder(path)
    files = sorted(p for p in folder.iterdir() if p.suffix in (".mcap", ".db3"))
    try:
        with Reader(folder) as reader:
            counts = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
            lines = [
                f"Files:             {', '.join(p.name for p in files)}",
                f"Bag size:          {sum(p.stat().st_size for p in files) / 1e6:.1f} MB",
                f"Storage id:        {'mcap' if any(p.suffix == '.mcap' for p in files) else 'sqlite3'}",
                f"Duration:          {reader.duration / 1e9:.3f} s",
                f"Start:             {reader.start_time / 1e9:.3f}",
                f"End:               {reader.end_time / 1e9:.3f}",
                f"Messages:          {reader.message_count}",
                "Topic information:",
            ]
            lines += [
                f"  Topic: {topic} | Type: {msgtype} | Count: {count}" for topic, (msgtype, count) in sorted(counts.items())
            ]
            return "\n".join(lines)
    except Exception as err:
        raise BagError(
            f"{path}: cannot read the bag ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else 'damaged'})"
        ) from None


def _bag_folder(path: str | Path) -> Path:
    """The bag folder for a folder or its .mcap file."""
    path = Path(path)
    if not path.exists():
        raise BagError(f"bag not found: {path}")
    folder = path.parent if path.is_file() else path
    if not (folder / "metadata.yaml").is_file():
        raise BagError(f"{path}: not a rosbag2 bag (no metadata.yaml beside it)")
    return folder


def split_by_question(messages: list[BagMessage], markers: list[QuestionMarker]) -> list[list[BagMessage]]:
    """The replayed messages of each question: from its start marker to the next one's,
    except that an utterance's end of speech and final belong to the question in which
    its speech ended.  A slow recognizer (make-bag's closing re-decode of a long
    question) can publish a final after the next question began; by publish time that
    question would lose its final and the next one get two."""
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Header

    questions: list[list[BagMessage]] = [[] for _ in markers]
    starts = [m.t_start_ns for m in markers[1:]]
    question_at = lambda t_ns: sum(t_ns >= start for start in starts)  # noqa: E731
    closing = None  # the question of the last end of speech: its final follows it
    for message in messages:
        index = question_at(message.t_ns)
        if message.topic == "asr/speech_end":
            stamp = deserialize_message(message.raw, Header).stamp
            index = closing = question_at(stamp.sec * 1_000_000_000 + stamp.nanosec)
        elif message.topic == "asr/final" and closing is not None:
            index, closing = closing, None
        questions[index].append(message)
    return questions
