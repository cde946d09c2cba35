"""Build a corpus of bad inputs (and a few good clips of real speech) with each one's expected outcome.

Why: "a failed item is a recorded row with its error, never a crash and never a silent drop" is
only worth something if every kind of bad input a user can hand the engine has been tried. This
builder writes one NeMo manifest whose rows are bad in one way each (plus good LibriVox clips and
harmless variants of them: resampled, multichannel, clipped), and a set of small manifests that
must stop a run *before any model loads* (duplicate ids, missing column, ...).

The expected outcomes assume the recipe sets ``dataset.allow_outside_root: false`` and keeps the
default ``dataset.max_duration_s`` (1800 s).

CLI::

    python scripts/make_bad_inputs.py OUT_DIR        # prints the cases and expected outcomes
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

log = logging.getLogger("make_bad_inputs")

LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")
LONG_CLIP_S = 1801.0  # one second over the engine's default dataset.max_duration_s (1800 s)


@dataclass(frozen=True)
class ExpectedOutcome:
    """What the engine must do with one row.

    ``outcome`` is 'ok' (a hypothesis, no error) or 'error' (a row whose ``error`` matches
    ``pattern``, a regular expression); ``same_as`` names a good clip whose hypothesis this row's
    should match (resampled/multichannel/clipped copies of it).
    """

    outcome: str
    case: str
    pattern: str | None = None
    same_as: str | None = None


@dataclass(frozen=True)
class StopCase:
    """A manifest that must stop the run before models load, with a ``ManifestError``.

    ``pattern`` must match the message; ``line`` and ``field`` are what the error must name
    (None where the problem is not on one line).
    """

    name: str
    path: Path
    pattern: str
    line: int | None = None
    field: str | None = None
    reader: str = "auto"


def librivox_clips(n: int = 3) -> list[tuple[Path, str]]:
    """The first ``n`` LibriVox clips of Debian's pocketsphinx-testdata with their transcripts."""
    trans: dict[str, str] = {}
    tfile = LIBRIVOX / "transcription"
    if not tfile.exists():
        raise FileNotFoundError(f"{tfile} not found: apt-get install pocketsphinx-testdata")
    for line in tfile.read_text(errors="replace").splitlines():
        if line.strip().endswith(")") and "(" in line:
            text, uid = line.rsplit("(", 1)
            trans[uid.rstrip(")").strip()] = " ".join(text.replace("<s>", " ").replace("</s>", " ").split())
    return [(w, trans[w.stem]) for w in sorted(LIBRIVOX.glob("*.wav")) if w.stem in trans][:n]


def _wav_header(n_frames: int, sr: int, channels: int = 1, bits: int = 16) -> bytes:
    """A canonical 44-byte PCM WAV header (lets us write huge or empty files without samples)."""
    block = channels * bits // 8
    data = n_frames * block
    return (
        b"RIFF"
        + struct.pack("<I", 36 + data)
        + b"WAVE"
        + b"fmt "
        + struct.pack("<IHHIIHH", 16, 1, channels, sr, sr * block, block, bits)
        + b"data"
        + struct.pack("<I", data)
    )


def write_long_sparse_wav(path: Path, seconds: float = LONG_CLIP_S, sr: int = 16000) -> Path:
    """A valid 16-bit WAV of ``seconds`` of silence, written as a sparse file: no samples in memory
    and (on file systems with holes) almost nothing on disk."""
    n = int(seconds * sr)
    with open(path, "wb") as fh:
        fh.write(_wav_header(n, sr))
        fh.truncate(44 + 2 * n)
    return path


def _mp4(path: Path, source: Path) -> Path:
    """An AAC-in-MP4 file (a container libsndfile cannot open); a bare 'ftyp' box without ffmpeg."""
    if shutil.which("ffmpeg"):
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-i", str(source), "-c:a", "aac", "-f", "mp4", str(path)], check=True)
    else:
        path.write_bytes(struct.pack(">I", 24) + b"ftypM4A \x00\x00\x00\x00M4A mp42" + b"\x00" * 512)
    return path


def build_bad_input_corpus(out_dir: Path | str, good: Sequence[tuple[Path, str]] | None = None) -> tuple[Path, dict[str, ExpectedOutcome]]:
    """Write ``out_dir/corpus/manifest.jsonl`` (its folder is the dataset root) and return it with
    the expected outcome of every ``utt_id``. ``good``: (wav, transcript) pairs of real speech,
    copied into the root (default: three LibriVox clips)."""
    out = Path(out_dir)
    root = out / "corpus"
    audio = root / "audio"
    outside = out / "outside"
    for d in (audio, outside):
        d.mkdir(parents=True, exist_ok=True)
    good = list(good) if good is not None else librivox_clips(3)
    if not good:
        raise ValueError("need at least one good clip of speech")
    rows: list[dict[str, object]] = []
    raw_lines: list[bytes] = []
    exp: dict[str, ExpectedOutcome] = {}

    def add(
        uid: str, path: str, text: object, outcome: str, case: str, pattern: str | None = None, same_as: str | None = None, **labels: object
    ) -> None:
        rows.append({"utt_id": uid, "audio_filepath": path, "text": text, **labels})
        exp[uid] = ExpectedOutcome(outcome, case, pattern, same_as)

    good_ids = []
    for i, (wav, text) in enumerate(good):
        uid = f"good-{i}"
        shutil.copy(wav, audio / f"{uid}.wav")
        add(uid, f"audio/{uid}.wav", text, "ok", "real speech (LibriVox)")
        good_ids.append(uid)
    x, sr = sf.read(audio / "good-0.wav", dtype="float32")
    ref0 = good[0][1]
    import soxr

    # --- harmless variants of good-0: must be transcribed like it ---------------------------------
    for rate in (8000, 44100, 48000):
        name = f"sr{rate}"
        sf.write(audio / f"{name}.wav", soxr.resample(x, sr, rate).astype(np.float32), rate, subtype="PCM_16")
        add(name, f"audio/{name}.wav", ref0, "ok", f"{rate} Hz sample rate (resampled to 16 kHz)", same_as="good-0")
    sf.write(audio / "stereo.wav", np.stack([x, x], axis=1), sr)
    add("stereo", "audio/stereo.wav", ref0, "ok", "stereo (down-mixed to mono)", same_as="good-0")
    sf.write(audio / "six-channel.flac", np.stack([x] * 6, axis=1), sr)
    add("six-channel", "audio/six-channel.flac", ref0, "ok", "6-channel FLAC (down-mixed to mono)", same_as="good-0")
    gain = 6.0 / max(float(np.max(np.abs(x))), 1e-6)
    clipped = np.clip(x * gain, -1.0, 1.0)
    sf.write(audio / "clipped.wav", clipped, sr, subtype="PCM_16")
    frac = float(np.mean(np.abs(clipped) >= 0.999))
    add(
        "clipped",
        "audio/clipped.wav",
        ref0,
        "ok",
        f"hard clipping ({frac:.0%} of samples at full scale): still transcribed, no error",
        same_as="good-0",
    )
    # mixed types in one label column: every value is kept as a string label
    rows[-6]["accent"] = 3
    rows[-5]["accent"] = True
    rows[-4]["accent"] = [1, "two"]
    rows[-3]["accent"] = {"k": "v"}
    rows[-2]["accent"] = 2.5
    rows[-1]["accent"] = "en-gb"

    # --- files that cannot be used ---------------------------------------------------------------
    add("missing-file", "audio/does-not-exist.wav", "gone", "error", "missing file", r"audio file not found")
    (audio / "zero.wav").write_bytes(b"")
    add("zero-byte", "audio/zero.wav", "nothing", "error", "zero-byte file", r"empty \(0 bytes\)")
    (audio / "a-directory.wav").mkdir(exist_ok=True)
    add("directory", "audio/a-directory.wav", "dir", "error", "path is a directory", r"is a directory")
    add("no-audio-path", "", "no path", "error", "empty audio path", r"no audio")
    good_wav = (audio / "good-0.wav").read_bytes()
    (audio / "truncated.wav").write_bytes(good_wav[: len(good_wav) // 2])
    add("truncated-wav", "audio/truncated.wav", ref0, "error", "WAV cut in half", r"truncated")
    (audio / "header-only.wav").write_bytes(good_wav[:40])
    add("header-only-wav", "audio/header-only.wav", ref0, "error", "WAV cut inside its header", r"unreadable|truncated|corrupt")
    (audio / "corrupt.wav").write_bytes(b"RIFF\x10\x00\x00\x00WAVEfmt " + os.urandom(64) + b"data" + os.urandom(256))
    add("corrupt-wav", "audio/corrupt.wav", "noise", "error", "WAV with a garbage fmt chunk", r"unreadable|corrupt|truncated")
    sf.write(audio / "good-0.flac", x, sr)
    flac = (audio / "good-0.flac").read_bytes()
    (audio / "good-0.flac").unlink()
    (audio / "truncated.flac").write_bytes(flac[: len(flac) // 2])
    add("truncated-flac", "audio/truncated.flac", ref0, "error", "FLAC cut in half", r"truncated or corrupt")
    bad = bytearray(flac)
    for i in range(len(bad) // 3, len(bad) // 3 + 2000, 7):
        bad[i] ^= 0x5A
    (audio / "corrupt.flac").write_bytes(bytes(bad))
    add("corrupt-flac", "audio/corrupt.flac", ref0, "error", "FLAC with flipped bits in its frames (CRC mismatch)", r"truncated or corrupt")
    if shutil.which("ffmpeg"):
        with open(audio / "streamed.flac", "wb") as fh:
            subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(audio / "good-0.wav"), "-f", "flac", "-"], stdout=fh, check=True)
        add(
            "streamed-flac",
            "audio/streamed.flac",
            ref0,
            "error",
            "FLAC from a streaming encoder (no length in its header)",
            r"does not state the clip's length",
        )
    (audio / "text.wav").write_text("this is a text file, not audio\n")
    add("text-as-wav", "audio/text.wav", "text", "error", "text file named .wav", r"unreadable or unsupported")
    _mp4(audio / "aac.m4a", audio / "good-0.wav")
    add(
        "mp4-container", "audio/aac.m4a", ref0, "error", "AAC in an MP4 container (libsndfile cannot read it)", r"unreadable or unsupported"
    )
    (audio / "zero-frames.wav").write_bytes(_wav_header(0, 16000))
    add("zero-frames", "audio/zero-frames.wav", "nothing", "error", "valid WAV header, 0 frames", r"0 samples")
    sf.write(audio / "silent.wav", np.zeros(sr * 2, dtype=np.float32), sr)
    add("all-silent", "audio/silent.wav", "silence", "error", "all-silent audio (digital zero)", r"silent")
    y = x.copy()
    y[1000:1010] = np.nan
    sf.write(audio / "nan.wav", y, sr, subtype="FLOAT")
    add("nan-samples", "audio/nan.wav", ref0, "error", "NaN samples in a float WAV", r"NaN/Inf")
    y = x.copy()
    y[500] = np.inf
    y[501] = -np.inf
    sf.write(audio / "inf.wav", y, sr, subtype="FLOAT")
    add("inf-samples", "audio/inf.wav", ref0, "error", "+/-Inf samples in a float WAV", r"NaN/Inf")
    write_long_sparse_wav(audio / "long-30min.wav")
    add(
        "long-30min",
        "audio/long-30min.wav",
        "long",
        "error",
        f"{LONG_CLIP_S:.0f} s file (over the 1800 s limit): rejected before reading samples",
        r"over the limit of 1800 s",
    )

    # --- paths outside the dataset root (recipe: allow_outside_root: false) ---------------------
    shutil.copy(audio / "good-0.wav", outside / "speech.wav")
    add("outside-relative", "../outside/speech.wav", ref0, "error", "relative path escaping the root (../)", r"outside the dataset root")
    add(
        "outside-absolute",
        str((outside / "speech.wav").resolve()),
        ref0,
        "error",
        "absolute path outside the root",
        r"outside the dataset root",
    )
    link = audio / "link-outside.wav"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to((outside / "speech.wav").resolve())
    add("outside-symlink", "audio/link-outside.wav", ref0, "error", "symlink inside the root pointing outside", r"outside the dataset root")

    # --- references ------------------------------------------------------------------------------
    add("empty-reference", "audio/good-0.wav", "", "error", "empty reference", r"reference is empty")
    add("blank-reference", "audio/good-0.wav", "  \t ", "error", "whitespace-only reference", r"reference is empty")
    add(
        "list-reference",
        "audio/good-0.wav",
        ["not", "a", "string"],
        "error",
        "reference of the wrong type (a list)",
        r"reference must be text",
    )
    rows.append({"utt_id": "no-reference", "audio_filepath": "audio/good-0.wav"})
    exp["no-reference"] = ExpectedOutcome("error", "reference field absent", r"no reference text")
    # a line whose reference is Latin-1, not UTF-8
    raw_lines.append(b'{"utt_id": "latin1-reference", "audio_filepath": "audio/good-0.wav", "text": "caf\xe9 cr\xe8me"}')
    exp["latin1-reference"] = ExpectedOutcome("error", "reference not valid UTF-8 (Latin-1 bytes)", r"not valid UTF-8")

    manifest = root / "manifest.jsonl"
    with open(manifest, "wb") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False).encode("utf-8") + b"\n" for r in rows)
        fh.writelines(line + b"\n" for line in raw_lines)
    return manifest, exp


def build_stop_manifests(out_dir: Path | str, audio_path: Path | None = None) -> list[StopCase]:
    """Manifests that must stop a run before any model loads, naming file, line and field."""
    out = Path(out_dir) / "stop"
    out.mkdir(parents=True, exist_ok=True)
    wav = str(audio_path or (librivox_clips(1)[0][0]))
    cases: list[StopCase] = []

    def jsonl(name: str, lines: list[str]) -> Path:
        p = out / f"{name}.jsonl"
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return p

    def rec(**kw: object) -> str:
        return json.dumps({"audio_filepath": wav, "text": "hello", **kw})

    p = jsonl("duplicate-ids", [rec(utt_id="a"), rec(utt_id="b"), rec(utt_id="a")])
    cases.append(StopCase("duplicate utt_id", p, rf"duplicate utt_id 'a' \(first at {p}:1, again at {p}:3\)", None, "utt_id"))
    p = jsonl("duplicate-ids-mixed-types", [rec(utt_id=1), rec(utt_id="1")])
    cases.append(StopCase("ids 1 and '1' collide", p, r"duplicate utt_id '1'", None, "utt_id"))
    p = jsonl("missing-audio-column", [rec(utt_id="a"), json.dumps({"utt_id": "b", "text": "no audio column"})])
    cases.append(StopCase("missing audio column (JSONL)", p, r"missing the audio path column", 2, "audio_filepath"))
    p = jsonl("duration-not-a-number", [rec(utt_id="a", duration=1.5), rec(utt_id="b", duration="three")])
    cases.append(StopCase("mixed types in duration", p, r"duration 'three' is not a number", 2, "duration"))
    p = jsonl("invalid-json", [rec(utt_id="a"), '{"utt_id": "b", "audio_filepath": '])
    cases.append(StopCase("invalid JSON line", p, r"invalid JSON", 2, None))
    p = jsonl("not-an-object", [rec(utt_id="a"), '["a", "list"]'])
    cases.append(StopCase("line is not a JSON object", p, r"must be a JSON object", 2, None))
    p = out / "missing-text-column.csv"
    p.write_text(f"audio_filepath,speaker\n{wav},s1\n", encoding="utf-8")
    cases.append(StopCase("missing text column (CSV)", p, r"no reference text column", 1, "text"))
    p = out / "extra-field.csv"
    p.write_text(f"audio_filepath,text\n{wav},hello\n{wav},hello,surplus\n", encoding="utf-8")
    cases.append(StopCase("CSV row with more fields than the header", p, r"row has 3 fields, header has 2", 3, None))
    p = jsonl("empty", [""])
    cases.append(StopCase("manifest without records", p, r"no records", None, None))
    return cases


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    manifest, expected = build_bad_input_corpus(args.out_dir)
    stops = build_stop_manifests(args.out_dir)
    log.info("manifest: %s (%d rows; recipe must set dataset.allow_outside_root: false)", manifest, len(expected))
    for uid, e in expected.items():
        log.info("  %-20s %-5s %s", uid, e.outcome, e.case)
    log.info("stop-before-load manifests: %d", len(stops))
    for s in stops:
        log.info("  %-40s %s", s.name, s.path)
    (Path(args.out_dir) / "expected.json").write_text(
        json.dumps(
            {
                "manifest": str(manifest),
                "rows": {k: asdict(v) for k, v in expected.items()},
                "stop": [{**asdict(s), "path": str(s.path)} for s in stops],
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
