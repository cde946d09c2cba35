"""Recorded noise and measured rooms in the perturbation ladder: MUSAN, RIRS_NOISES and plain folders.

The folders are built small in a temporary folder (``tests/noise_banks.py``) in the real sets'
layouts and formats. Checked: the files each layout offers, the SNR of the mix, the convolution
against a hand computation, a file choice that depends on the clip alone, the provenance of every
file, the cache key following the files' digests, errors naming the recipe key and the file, and
one short ``audit run``.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
import soxr
import yaml
from scipy.signal import fftconvolve
from typer.testing import CliRunner

from audits.cli.main import app
from audits.profiles.perturbations import FAMILY_FIELDS, check_sources, derive, parse_perturbations
from engine.audio.shards import encode_audio
from engine.corpus import transforms as tf
from engine.data import DecodeOptions, Utterance
from engine.datasets.base import in_memory_dataset
from engine.errors import ConfigError
from engine.options import field_rows
from engine.perturb import banks, ops
from engine.perturb.banks import BankSpec, scan_bank
from engine.perturb.derive import Family, derive_dataset
from tests.conftest import REPO, write_manifest
from tests.noise_banks import build_musan, build_rirs_noises, measured_like_rir

SR = 16000


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory, librivox: list[tuple[Path, str]]) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("banks")
    return {"musan": build_musan(root, librivox[0][0]), "rirs": build_rirs_noises(root)}


def _voiced(i: int, seconds: float = 1.5) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    x = sum(np.sin(2 * np.pi * (110 + 20 * i) * k * t) / k for k in range(1, 8)) * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t))
    x[: SR // 10] = 0.0  # a pause, so active and whole-clip power differ
    return (0.2 * x / np.max(np.abs(x))).astype(np.float32)


def _dataset(ids: list[int], shard_size: int):
    utts = [Utterance(f"u{i}", "a b c", audio_bytes=encode_audio(_voiced(i), SR), duration_s=1.5, speaker=f"s{i}") for i in ids]
    return in_memory_dataset("t", "mem", "mem", utts, shard_size, None)


def _derived(ds) -> dict[str, Utterance]:
    return {u.utt_id: u for sid in ds.shard_ids if sid.startswith("perturbed-") for u in ds.load_shard(sid).utterances}


def _read(b: bytes) -> np.ndarray:
    return sf.read(io.BytesIO(b), dtype="float32")[0]


def _families(folders: dict[str, Path]) -> tuple[Family, ...]:
    cfg = parse_perturbations(
        {
            "families": [
                {"name": "musan", "kind": "noise", "noise": "recorded", "folder": str(folders["musan"]), "levels": [10, 0]},
                {"name": "rooms", "kind": "room", "folder": str(folders["rirs"]), "levels": [0.5, 1.5]},
            ]
        },
        "r.yaml",
    )
    return check_sources(cfg)


def test_each_layout_offers_its_files_with_metadata_and_license(folders: dict[str, Path]) -> None:
    m, r = folders["musan"], folders["rirs"]
    noise = scan_bank(BankSpec(str(m), "noise"))
    assert noise.layout == "musan" and noise.subsets == ("noise",)
    assert {f.path: f.license for f in noise.files} == {
        "noise/free-sound/noise-free-sound-0000.wav": "noise/free-sound/LICENSE",
        "noise/free-sound/noise-free-sound-0001.wav": "noise/free-sound/LICENSE",
        "noise/sound-bible/noise-sound-bible-0000.wav": "noise/sound-bible/LICENSE",
    }
    f = noise.files[1]
    assert (f.sample_rate, f.channels) == (44100, 2) and f.sha256 == hashlib.sha256((m / f.path).read_bytes()).hexdigest()
    music = scan_bank(BankSpec(str(m), "noise", subsets=("music/fma",), music_vocals=False))
    assert [f.path for f in music.files] == ["music/fma/music-fma-0000.wav"] and dict(music.files[0].meta)["vocals"] == "N"
    assert music.excluded == (("music/fma/music-fma-0001.wav", "music with vocals"),)
    assert len(scan_bank(BankSpec(str(m), "noise", subsets=("music",))).files) == 2  # vocals kept by default, as Kaldi and Lhotse do
    rir = scan_bank(BankSpec(str(r), "rir"))
    assert rir.layout == "rirs_noises" and rir.subsets == ("simulated_rirs", "real_rirs_isotropic_noises")
    by = {f.path: f for f in rir.files}
    assert "real_rirs_isotropic_noises/RVB2014_type1_noise_largeroom1_1.wav" not in by  # the noise_list's file is not a response
    small = by["simulated_rirs/smallroom/Room001/Room001-00002.wav"]
    assert dict(small.meta)["room-id"] == "smallroom-Room001" and dict(small.meta)["absorption"] == "0.50"  # rir_list and room_info
    designed = {
        "smallroom/Room001/Room001-00001": 0.25,
        "smallroom/Room001/Room001-00002": 0.3,
        "mediumroom/Room001/Room001-00001": 0.7,
        "mediumroom/Room001/Room001-00002": 0.8,
    }
    for stem, rt in designed.items():
        assert by[f"simulated_rirs/{stem}.wav"].rt60_s == pytest.approx(rt, rel=0.08)  # T20 of the designed decay
    assert by["real_rirs_isotropic_noises/RVB2014_type1_rir_largeroom1_far_angla.wav"].rt60_s == pytest.approx(1.2, rel=0.08)
    assert by["real_rirs_isotropic_noises/air_type1_rir_office_1.wav"].rt60_s == pytest.approx(0.5, rel=0.08)  # inverted polarity
    noises = scan_bank(BankSpec(str(r), "noise"))
    assert {dict(f.meta)["noise-type"] for f in noises.files} == {"point-source", "isotropic"} and len(noises.files) == 3
    plain = scan_bank(BankSpec(str(r / "pointsource_noises"), "noise"))
    assert plain.layout == "plain" and [f.path for f in plain.files] == ["noise1.wav", "noise2.wav"] and plain.files[0].license is None


def test_a_plain_folder_of_wav_and_flac(tmp_path: Path) -> None:
    """Every WAV and FLAC file under the folder, in sub-folders too; hidden files, other formats and text files aside."""
    from tests.noise_banks import hum, rain

    (tmp_path / "office").mkdir()
    sf.write(tmp_path / "office" / "hvac.flac", hum(22050, 2.0, 1), 22050)
    (tmp_path / "street").mkdir()
    sf.write(tmp_path / "street" / "Rain.WAV", rain(16000, 1.0, 2), 16000)
    sf.write(tmp_path / ".hidden.wav", rain(16000, 1.0, 3), 16000)
    (tmp_path / "notes.txt").write_text("recorded on 2024-05-01\n")
    (tmp_path / "LICENSE").write_text("CC BY 4.0, recorded by the team\n")
    bank = scan_bank(BankSpec(str(tmp_path), "noise"))
    assert bank.layout == "plain" and [f.path for f in bank.files] == ["office/hvac.flac", "street/Rain.WAV"]
    assert all(f.license == "LICENSE" for f in bank.files) and bank.files[0].sample_rate == 22050
    y, info = banks.apply(_voiced(0), SR, "noise", bank, (5.0,), 5.0, pick=7)
    assert info["file"]["path"] in {"office/hvac.flac", "street/Rain.WAV"} and len(y) == len(_voiced(0))


def test_recorded_noise_is_mixed_at_the_requested_snr(folders: dict[str, Path]) -> None:
    """Every file (looped, cropped, resampled from 8 and 44.1 kHz, stereo) at 5 and -5 dB, by the corpus's own SNR rule."""
    bank = scan_bank(BankSpec(str(folders["musan"]), "noise"))
    x = 0.25 * _voiced(0, 2.0)  # quiet enough that no mix needs peak protection
    for f in bank.files:
        bg, rec = banks.read_noise(bank, f, len(x), SR, np.random.default_rng(0))
        assert len(bg) == len(x) and rec["looped"] == (f.duration_s < 2.0)
        for snr in (5.0, -5.0):
            y, info = ops.mix_recorded(x, SR, bg, snr)
            assert info["snr_db"] == snr and float(np.max(np.abs(y))) < 0.98
            assert tf.measured_snr_db(x, y, SR) == pytest.approx(snr, abs=1e-3)
            p_noise = float(np.mean((y.astype(np.float64) - x) ** 2))  # the published rule: active speech power over noise power
            assert 10 * math.log10(tf.active_power(x, SR) / p_noise) == pytest.approx(snr, abs=1e-3)
    # the SNR survives the derived clip's FLAC encoding
    ds = derive_dataset(_dataset([0, 1], 2), _families(folders)[:1], 3, folders["musan"].parent / "cache-snr")
    u = _derived(ds)["u1~musan:0"]
    assert tf.measured_snr_db(_voiced(1), _read(u.audio_bytes), SR) == pytest.approx(0.0, abs=0.3)


def test_room_convolution_equals_a_hand_computation(folders: dict[str, Path], tmp_path: Path) -> None:
    """48 kHz stereo response with a pre-delay: channel 0, resampled, unit energy, cut at the direct path, clip's length, active level."""
    bank = scan_bank(BankSpec(str(folders["rirs"]), "rir", subsets=("real_rirs_isotropic_noises",)))
    f = next(f for f in bank.files if f.sample_rate == 48000)
    x = _voiced(2)
    h, rec = banks.read_rir(bank, f, SR)
    y, info = ops.convolve_rir(x, SR, h)
    raw, sr_f = sf.read(folders["rirs"] / f.path, dtype="float64", always_2d=True)
    hand_h = soxr.resample(raw[:, 0], sr_f, SR, quality="HQ")
    hand_h = hand_h / np.sqrt(np.sum(hand_h**2))
    peak = int(np.argmax(np.abs(hand_h)))
    assert peak == info["direct_path_index"] and 0.003 * SR < peak < 0.006 * SR  # the 4 ms pre-delay is cut off
    hand = fftconvolve(x.astype(np.float64), hand_h)[peak : peak + len(x)]
    hand *= math.sqrt(tf.active_power(x, SR) / tf.active_power(hand, SR))
    hand /= max(1.0, float(np.max(np.abs(hand))) / 0.98)
    assert len(y) == len(x) and np.allclose(y, hand, atol=1e-6)
    assert rec["path"] == f.path and rec["channels"] == 2 and rec["channel"] == 0
    # a response that is one delayed (inverted) impulse leaves the clip as it was
    sf.write(tmp_path / "delta.wav", np.r_[np.zeros(300), -0.5, np.zeros(2000)], SR, subtype="FLOAT")
    y2, _ = ops.convolve_rir(x, SR, sf.read(tmp_path / "delta.wav")[0])
    assert np.allclose(y2, -x, atol=1e-6)


def test_file_choice_depends_on_the_clip_alone(folders: dict[str, Path]) -> None:
    """Another order, other shards, other neighbours: the same clip gets the same file, offset and bytes; levels share the file."""
    fams = _families(folders)
    a = _derived(derive_dataset(_dataset([0, 1, 2, 3, 4, 5], 2), fams, 9, folders["musan"].parent / "cache-a"))
    b = _derived(derive_dataset(_dataset([5, 3, 1, 4], 3), fams, 9, folders["musan"].parent / "cache-b"))
    for uid, u in b.items():
        assert u.audio_bytes == a[uid].audio_bytes and u.derivation == a[uid].derivation
    picks = {a[f"u{i}~musan:10"].derivation["perturbation"]["file"]["path"] for i in range(6)}
    assert len(picks) >= 2  # the clips draw from the folder, not one file for all
    for i in range(6):
        lo, hi = (a[f"u{i}~musan:{lv}"].derivation["perturbation"]["file"] for lv in (10, 0))
        assert (lo["path"], lo["offset_frames"]) == (hi["path"], hi["offset_frames"])  # only the SNR changes along the ladder
        room = a[f"u{i}~rooms:0.5"].derivation["perturbation"]["file"]
        assert room["rt60_s"] <= 0.5 and a[f"u{i}~rooms:1.5"].derivation["perturbation"]["file"]["rt60_s"] > 0.5
    c = _derived(derive_dataset(_dataset([0, 1, 2, 3, 4, 5], 2), fams, 10, folders["musan"].parent / "cache-c"))
    assert any(c[k].derivation["perturbation"]["file"] != a[k].derivation["perturbation"]["file"] for k in a)  # another seed, other draws


def test_provenance_of_every_file_is_recorded(folders: dict[str, Path]) -> None:
    fams = _families(folders)
    ds = derive_dataset(_dataset([0, 1, 2], 3), fams, 1, folders["musan"].parent / "cache-prov")
    derived = _derived(ds)
    rec = derived["u2~musan:10"].derivation["perturbation"]
    assert rec["noise"] == "recorded" and rec["snr_db"] == 10.0 and rec["family"] == "musan"
    f = rec["file"]
    path = folders["musan"] / f["path"]
    assert f["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() and f["layout"] == "musan"
    assert f["license"] == str(Path(f["path"]).parent / "LICENSE") and (folders["musan"] / f["license"]).is_file()
    frames = sf.info(path).frames
    assert 0 <= f["offset_frames"] <= max(0, frames - f["frames_used"]) or f["looped"]
    room = derived["u0~rooms:1.5"].derivation["perturbation"]
    assert room["file"]["layout"] == "rirs_noises" and room["file"]["meta"]["rir-id"] and room["file"]["band_s"] == [0.5, 1.5]
    assert room["file"]["license"] is None  # RIRS_NOISES ships no license file beside the audio
    summary = ds.meta["perturbations"]["sources"]
    assert summary["musan"]["layout"] == "musan" and summary["musan"]["clips"] == 6 and summary["rooms"]["clips"] == 6
    assert sum(x["clips"] for x in summary["musan"]["licenses"]) == 6
    manifest = json.loads((folders["musan"].parent / "cache-prov" / ds.meta["perturbations"]["cache_key"] / "sources.json").read_text())
    used = {e["path"]: e for e in manifest["musan"]["files_used"]}
    assert sum(e["clips"] for e in used.values()) == 6
    assert all(e["sha256"] == hashlib.sha256((folders["musan"] / p).read_bytes()).hexdigest() for p, e in used.items())


def test_cache_follows_the_files_digests(folders: dict[str, Path], tmp_path: Path) -> None:
    """An unchanged folder (even moved) reuses the shards; a changed noise file rebuilds them."""
    m = shutil.copytree(folders["musan"], tmp_path / "musan")

    def fams(folder: Path) -> tuple[Family, ...]:
        return check_sources(
            parse_perturbations({"families": [{"kind": "noise", "noise": "recorded", "folder": str(folder), "levels": [5]}]})
        )

    src = _dataset([0, 1], 2)
    first = derive_dataset(src, fams(m), 0, tmp_path / "cache")
    shard = next((tmp_path / "cache" / first.meta["perturbations"]["cache_key"]).glob("derived-*.parquet"))
    stamp = shard.stat().st_mtime_ns
    moved = shutil.copytree(m, tmp_path / "elsewhere" / "musan")
    again = derive_dataset(src, fams(moved), 0, tmp_path / "cache")
    assert again.meta["perturbations"]["cache_key"] == first.meta["perturbations"]["cache_key"] and shard.stat().st_mtime_ns == stamp
    used = {u.derivation["perturbation"]["file"]["path"] for u in _derived(first).values()}
    target = m / sorted(used)[0]
    x, sr = sf.read(target, dtype="float32")
    sf.write(target, x * 0.5, sr)  # same length and name, other samples
    changed = derive_dataset(src, fams(m), 0, tmp_path / "cache")
    assert changed.meta["perturbations"]["cache_key"] != first.meta["perturbations"]["cache_key"]
    assert changed.fingerprint != first.fingerprint
    new = {u.derivation["perturbation"]["file"]["sha256"] for u in _derived(changed).values()}
    assert hashlib.sha256(target.read_bytes()).hexdigest() in new


@pytest.mark.parametrize(
    "family, match",
    [
        ({"kind": "noise", "noise": "recorded", "levels": [5]}, r"families\[0\]: missing required key 'folder'"),
        ({"kind": "noise", "noise": "white", "folder": "x", "levels": [5]}, r"families\[0\]\.folder: only a recorded noise"),
        ({"kind": "room", "folder": "x", "levels": [1.0, 0.5]}, r"families\[0\]\.levels: .*list them ascending"),
        ({"kind": "room", "folder": "x", "levels": [1.0], "music_vocals": False}, r"families\[0\]\.music_vocals: a room family"),
        (
            {"kind": "noise", "noise": "recorded", "folder": "x", "levels": [5], "layout": "kaldi"},
            r"families\[0\]\.layout: 'kaldi' is not allowed",
        ),
        ({"kind": "noise", "noise": "recorded", "folder": "x", "levels": [5], "max_rir_s": 2}, r"families\[0\]\.max_rir_s: only a room"),
        (
            {"kind": "noise", "noise": "recorded", "folder": "x", "levels": [5], "music_vocals": "no"},
            r"families\[0\]\.music_vocals: expected a boolean",
        ),
    ],
)
def test_option_errors_name_the_recipe_key(family: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=r"r\.yaml: perturbations\." + match):
        parse_perturbations({"families": [family]}, "r.yaml")


def _bad_folders(tmp: Path, folders: dict[str, Path]) -> dict[str, Path]:
    (tmp / "empty").mkdir()
    (tmp / "mp3s").mkdir()
    (tmp / "mp3s" / "a.mp3").write_bytes(b"ID3")
    shutil.copytree(folders["rirs"] / "pointsource_noises", tmp / "broken")
    (tmp / "broken" / "noise_list").unlink()
    (tmp / "broken" / "zz.wav").write_bytes(b"RIFF....WAVEfmt garbage")
    (tmp / "long").mkdir()
    sf.write(tmp / "long" / "hall.wav", measured_like_rir(16000, 1.0, 5)[:, 0].repeat(1), 16000)
    sf.write(tmp / "long" / "song.wav", np.zeros(16000 * 12, dtype=np.float32) + 0.01, 16000)
    shutil.copytree(folders["rirs"] / "real_rirs_isotropic_noises", tmp / "badlist")
    with open(tmp / "badlist" / "rir_list", "a") as fh:
        fh.write("--rir-id gone --room-id gone RIRS_NOISES/real_rirs_isotropic_noises/gone.wav\n")
    return {
        "badlist": tmp / "badlist",
        "empty": tmp / "empty",
        "mp3s": tmp / "mp3s",
        "broken": tmp / "broken",
        "long": tmp / "long",
        "missing": tmp / "nope",
        "musan": folders["musan"],
        "rirs": folders["rirs"],
        "plain": folders["rirs"] / "pointsource_noises",
    }


@pytest.mark.parametrize(
    "family, match",
    [
        ({"noise": "recorded", "folder": "missing"}, r"families\[0\]\.folder: .*nope does not exist"),
        ({"noise": "recorded", "folder": "empty"}, r"families\[0\]\.folder: no WAV or FLAC noise recordings in .*empty"),
        ({"noise": "recorded", "folder": "mp3s"}, r"families\[0\]\.folder: no WAV or FLAC .*found only \.mp3"),
        ({"noise": "recorded", "folder": "broken"}, r"families\[0\]\.folder: zz\.wav in .*broken cannot be read as audio"),
        ({"noise": "recorded", "folder": "plain", "layout": "musan"}, r"families\[0\]\.layout: .* is not in the musan layout"),
        ({"noise": "recorded", "folder": "musan", "subsets": ["noises"]}, r"families\[0\]\.subsets\[0\]: 'noises' is not a part"),
        (
            {"noise": "recorded", "folder": "rirs", "subsets": ["simulated_rirs"]},
            r"families\[0\]\.subsets\[0\]: simulated_rirs holds no noise",
        ),
        ({"kind": "room", "folder": "musan", "levels": [1.0]}, r"families\[0\]\.folder: .* is a MUSAN folder"),
        (
            {"kind": "room", "folder": "badlist", "levels": [2.0]},
            r"families\[0\]\.folder: .*badlist/rir_list, line 3: .*gone\.wav is not a file",
        ),
        (
            {"kind": "room", "folder": "long", "levels": [1.0]},
            r"families\[0\]\.max_rir_s: song\.wav in .* is 12\.00 s long, over max_rir_s = 10",
        ),
        ({"kind": "room", "folder": "rirs", "levels": [0.1, 3.0]}, r"families\[0\]\.levels\[0\]: no response .* RT60 in \(0, 0\.1\] s"),
    ],
)
def test_folder_errors_name_the_key_and_the_file(family: dict, match: str, folders: dict[str, Path], tmp_path: Path) -> None:
    named = _bad_folders(tmp_path, folders)
    raw = {"kind": "noise", "levels": [5], **family, "folder": str(named[family["folder"]])}
    cfg = parse_perturbations({"families": [raw]}, "r.yaml")
    with pytest.raises(ConfigError, match=r"r\.yaml: perturbations\." + match):
        check_sources(cfg)


def test_docs_option_table_matches_the_code() -> None:
    doc = (REPO / "docs" / "profiles.md").read_text()
    for row in field_rows(FAMILY_FIELDS):
        assert row in doc, row


def test_audit_run_with_recorded_noise_and_rooms(folders: dict[str, Path], librivox: list[tuple[Path, str]], tmp_path: Path) -> None:
    """``audit run`` on a 3 s LibriVox clip with pocketsphinx: MUSAN noise and RIRS_NOISES rooms, provenance in summary.json."""
    picks = [c for c in librivox if c[0].stem.endswith("0880")]
    rows = [{"audio_filepath": str(p), "text": t, "utt_id": p.stem[-4:], "speaker": "austen"} for p, t in picks]
    manifest = write_manifest(tmp_path / "m.jsonl", rows)
    recipe = {
        "name": "recorded-noise",
        "dataset": {"path": str(manifest), "reader": "nemo"},
        "models": ["pocketsphinx-en-us"],
        "warmup": 0,
        "perturbations": {
            "n_boot": 50,
            "families": [
                {"name": "musan-noise", "kind": "noise", "noise": "recorded", "folder": "musan", "levels": [20, 5]},
                {"name": "rooms", "kind": "room", "folder": str(folders["rirs"]), "subsets": ["simulated_rirs"], "levels": [0.9]},
            ],
        },
    }
    shutil.copytree(folders["musan"], tmp_path / "musan")  # a folder relative to the recipe's
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe))
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", str(path), "--out", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    sec = summary["perturbations"]
    assert [lad["name"] for lad in sec["ladders"]] == ["musan-noise", "rooms"]
    src = sec["derived"]["sources"]
    assert src["musan-noise"]["folder"] == str(tmp_path / "musan") and src["musan-noise"]["clips"] == 2
    assert src["rooms"]["layout"] == "rirs_noises" and src["rooms"]["clips"] == 1 and src["rooms"]["rt60_range_s"][1] < 0.9
    table = pd.read_parquet(out / "utterances.parquet")
    assert len(table) == 1 + 3 and set(table["perturbation"]) == {"clean", "musan-noise:20", "musan-noise:5", "rooms:0.9"}
    derived = table[table["perturbation"] != "clean"]
    assert set(derived["parent_id"]) == {"0880"}
    assert (out / "derived" / src["musan-noise"]["manifest"]).is_file()
    assert "| musan-noise | " in (out / "report.md").read_text() and "musan/noise/" not in (out / "report.md").read_text()
    assert "Recorded noise and rooms" in (out / "report.html").read_text()
    # a folder that is gone stops the next run before any model loads or anything is written
    recipe["perturbations"]["families"][0]["folder"] = "gone"
    path.write_text(yaml.safe_dump(recipe))
    res = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "run2")])
    assert res.exit_code == 2 and "perturbations.families[0].folder" in res.output and not (tmp_path / "run2").exists()


def test_derive_reads_folders_through_the_section(folders: dict[str, Path], tmp_path: Path) -> None:
    cfg = parse_perturbations({"families": [{"kind": "room", "folder": str(folders["rirs"]), "levels": [2.0]}]})
    ds = derive(cfg, _dataset([0], 1), tmp_path, DecodeOptions())
    (u,) = _derived(ds).values()
    assert u.utt_id == "u0~room:2" and u.derivation["perturbation"]["unit"] == "s RT60"
