"""asr_node's `text` backend: a simulated user who says each text at a typing rate (its
partials as the words come, then the final) and waits for the robot's answer."""

from __future__ import annotations

import time

from ..audio.text_asr import text_partials
from .asr_state import AsrState


class SimulatedTextUser:
    """Runs on asr_node's source thread; `node` is the asr_node it speaks through."""

    def __init__(self, node, texts: list[str]):
        self.node = node
        self.texts = texts

    def __call__(self) -> None:
        node, p = self.node, self.node.p
        node.wait_for_listeners(need_tts=p["asr.text.wait_for_reply"])
        rate = p["asr.text.chars_per_minute"] / 60.0
        for text in self.texts:
            node.state = AsrState.PAUSE
            if node.waits.stopping.wait(p["asr.text.gap_s"]):
                return
            node.state = AsrState.SPEAKING
            partials, t_end = text_partials(text, rate)
            t0 = time.time()
            for t, said in partials:
                node.waits.sleep_until(t0 + t)
                node.publish_partial(said)
            node.waits.sleep_until(t0 + t_end)
            replies = node.replies
            node.publish_final(text, t0 + t_end)
            if p["asr.text.wait_for_reply"]:
                node.state = AsrState.WAITING_FOR_REPLY
                timeout = p["asr.text.reply_timeout_s"]
                answered = lambda replies=replies: node.replies > replies and not node.robot_speaking  # noqa: E731
                if not node.waits.until(answered, timeout) and not node.waits.stopping.is_set():
                    node.get_logger().warning(f"no reply within asr.text.reply_timeout_s={timeout:g} s; going on")
        node.state = AsrState.INPUT_FINISHED
