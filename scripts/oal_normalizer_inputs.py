"""The inputs of the Open ASR Leaderboard normalizer fixture (tests/fixtures/open-asr-leaderboard-normalizer).

Why: ``open-asr-leaderboard`` claims the leaderboard's output on any text. The fixture holds
inputs built here, per category (fillers, compounds, acronyms, names, numbers, currencies,
spellings, contractions, punctuation, unicode, real ASR transcripts, random mixtures), and the
output the leaderboard's own code gave for each; the README beside the fixture says how those
outputs were made. Every name, compound, filler, contraction and spelling entry of the
leaderboard's lists appears in at least one input. The inputs are deterministic (seeded).

CLI::

    python scripts/oal_normalizer_inputs.py OUT.jsonl     # one {"category", "input"} object per line
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

from normalizers.leaderboard_tables import (
    COMPOUNDS,
    CONTRACTION_SUFFIXES,
    FILLERS,
    IS_CONTRACTION_WORDS,
    NAMES,
    PERFECT_TENSES,
    SPELLING_EDITS,
    TITLES,
    WORD_EXPANSIONS,
    leaderboard_spellings,
)
from normalizers.numbers import decimal_to_words, int_to_words, ordinal_words, year_to_words

log = logging.getLogger("oal_normalizer_inputs")

ROOT = Path(__file__).resolve().parents[1]
VOXPOPULI = ROOT / "tests" / "fixtures" / "voxpopuli-150-predictions"
SEED = 30


# The inputs per category: lists of short strings, kept several per line rather than one per line
# fmt: off
def _cases_fillers(rng: random.Random) -> Iterator[str]:
    extra = ["hmmm", "ummm", "uhh", "uhhh", "mhmm", "mm-hmm", "uh-huh", "uh huh", "ahem", "ehm", "erm", "er", "hum-hum", "umbrella",
             "human", "ahead", "hmmmm", "em-dash", "UM", "Uh.", "uh,", "(um)", "[uh]", "um's", "huh?", "aha!", "ah-ha", "oh", "ohh"]
    for f in [*FILLERS, *extra]:
        yield f
        yield f.capitalize() + ", I think so."
        yield f"So {f}, we {f} went there {f.upper()}."
    for _ in range(40):
        words = rng.choices(["the", "vote", "is", "today", *FILLERS, *extra[:12]], k=rng.randint(3, 9))
        yield " ".join(words).capitalize() + rng.choice([".", "?", "...", ""])


def _cases_compounds(rng: random.Random) -> Iterator[str]:
    seps = [" ", "-", "  ", "—", ".", "–", "_", "/", "\t", ". "]
    for phrase, joined in COMPOUNDS:
        a, b = phrase.split()
        for sep in seps:
            yield f"{a}{sep}{b}"
        yield f"{a.upper()}-{b.capitalize()}"
        yield f"I sent the {a}-{b} at {rng.randint(1, 12)} {a} {b} today."
        yield joined
        yield f"{a}{b}s and {a} {b}s"
        yield f"{a} {b}{b[-1]} {a}{a[-1]} {b}"
    for s in ["A.M.", "P.M.", "5 a.m.", "5:30 p.m.", "a.m", "am I", "o.k.", "O.K.", "OK", "Okay", "ok.", "o k", "all right?", "alright",
              "it's all right now", "al right", "how ever", "however", "et cetera", "etc.", "etcetera", "&c", "e-mails", "X-rays",
              "T-shirts", "Sci-Fi", "wi fi network", "Hi-Fi", "lo-fi", "e-Book", "E-commerce", "x ray vision", "t shirt", "a m p m o k"]:
        yield s


def _cases_acronyms(rng: random.Random) -> Iterator[str]:
    fixed = ["B B C", "B.B.C.", "BBC", "the U S A", "U.S.A.", "U.S.", "the US", "I B M", "F.B.I.", "N.A.S.A.", "a b c", "A B C D E",
             "a i", "A.I.", "AI", "a b", "i a", "a i m", "x y z", "5 G", "5G", "4 K", "G 7", "3 D", "i o s", "I am a fan",
             "a cat and a dog", "Plan B", "vitamin C and D", "I, a, b", "A-B-C", "x - y", "1 2 3", "1 2", "a 1", "b 2 b",
             "I I I", "i i", "a a", "a a a", "the E U and the U K", "E.U.", "U.K.", "C-SPAN", "T.V.", "d v d", "m p 3", "mp 3",
             "covid 19", "C O V I D", "h i v", "j r r tolkien", "J. R. R. Tolkien", "George W. Bush", "B. B. King", "Q and A",
             "q & a", "A & E", "R&D", "AT&T", "a.k.a.", "e.g.", "i.e.", "P.S.", "u s b c", "W H O", "WHO"]
    yield from fixed
    letters = "abcdefghijklmnopqrstuvwxyz"
    for _ in range(150):
        run = [rng.choice(letters + "0123456789ai") for _ in range(rng.randint(1, 5))]
        sep = rng.choice([" ", ".", ". ", "-", " ", "  "])
        text = sep.join(run)
        if rng.random() < 0.5:
            text = text.upper()
        before, after = rng.choice(["the", "a", "I", "and", "", "we saw", "number"]), rng.choice(["", "is", "a", "report", "I", "one"])
        yield " ".join(x for x in (before, text, after) if x)


def _cases_names(rng: random.Random) -> Iterator[str]:
    canon = sorted(set(NAMES.values()))
    for variant in sorted(NAMES):
        name = variant.capitalize()
        yield rng.choice([f"I met {name} yesterday.", f"{name}'s report", f"Mr. {name}", f"{name}, {name.upper()}!", name])
    for c in canon:
        yield f"{c.capitalize()} and {rng.choice(sorted(NAMES)).capitalize()}"
    for _ in range(20):
        yield " ".join(n.capitalize() for n in rng.sample(sorted(NAMES), 5))
    yield from ["Mac Donald", "Mc Donald", "MacDonald's", "Mohammed Ali", "Muhammad Ali", "Stephen King", "Geoffrey Hinton",
                "Lewis Hamilton", "Jon Snow", "Ann-Marie", "Sara-Jane", "Marc Rutte", "Alan Turing", "Kris Kristofferson"]


def _cases_numbers(rng: random.Random) -> Iterator[str]:
    for _ in range(160):
        n = rng.choice([rng.randint(0, 20), rng.randint(21, 99), rng.randint(100, 999), rng.randint(1000, 99999),
                        rng.randint(10**5, 10**9), rng.randint(10**9, 10**12 - 1)])
        style = rng.randint(0, 3)
        words = int_to_words(n, british_and=style == 1, hyphen=style == 2, a_for_one=style == 3)
        yield rng.choice([words, words.capitalize() + ".", f"about {words} people", f"{words} and a half", f"{n:,}", str(n)])
    for _ in range(50):
        yield f"the {ordinal_words(rng.randint(1, 2000))} time"
    for _ in range(40):
        y = rng.randint(1100, 2099)
        yield rng.choice([f"in {year_to_words(y) or y}", f"in {y}", f"the {y // 10 * 10}s",
                          f"in the {int_to_words(y % 100 // 10 * 10)[:-1]}ies"])
    for _ in range(40):
        d = Decimal(rng.randint(0, 100000)) / Decimal(10 ** rng.randint(1, 4))
        yield rng.choice([decimal_to_words(d), str(d), f"{d} million", f"{decimal_to_words(d)} percent"])
    digit = ["oh", "o", "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "double", "triple"]
    for _ in range(60):
        yield " ".join(rng.choices(digit, k=rng.randint(2, 9)))
    yield from [
        "one oh one", "double oh seven", "triple five", "double double", "zero zero", "0 oh", "1.0", "2.0 and 3.00", "007",
        "1960s", "the 90s", "32nd", "1st 2nd 3rd 4th", "21 st", "minus five", "negative 3.5", "plus 3", "positive twenty",
        "point five", "zero point seven", "point", "point hundred", "a hundred", "one hundred and five", "hundred and",
        "two thousand and sixteen", "twenty sixteen", "nineteen eighty four", "ninth", "nineth", "the twelfth", "fifth",
        "one and a half", "two and a half million", "and a half", "a half", "one half", "three quarters", "sixes and sevens",
        "ones", "one's", "the one", "no one", "one of them", "1 2 3 go", "10 9 8", "1,000,000", "1,2,3", "12,345.67",
        "3.14159", "192.168.0.1", "1.2.3", "0.5", ".5", "5.", "5...", "twenty one", "twenty-one", "thirty first",
        "forty twos", "a million billion", "hundred thousand million", "eleven hundred", "nineteen hundreds", "millionth",
        "hundredths", "thousands of people", "1 million", "5 billion dollars", "4th of July", "covid-19", "mp3", "b2b", "h2o",
        "x1y2z3", "a1 b2", "3rd", "2nd", "1s and 0s", "24/7", "9/11", "50-50", "3-2", "1:30", "10:45 p.m.", "½", "¼", "2²",
        "one two three four five six seven eight nine ten eleven twelve", "seventeen seventy six", "eighteen hundred",
        "one thousand one", "one million and one", "one hundred one", "zero one two", "oh one oh", "o o o",
        "eleven eleven", "twenty twenty", "nineteen nineteen", "minus", "plus", "per", "percent", "per cent", "per capita",
    ]


def _cases_currencies(rng: random.Random) -> Iterator[str]:
    symbols = ["$", "£", "€", "¢", "¥", "₹", "₩", "US$"]
    for _ in range(100):
        sym = rng.choice(symbols)
        amount = rng.choice([str(rng.randint(0, 999)), f"{rng.randint(0, 99)}.{rng.randint(0, 99):02d}", f"{rng.randint(1, 9999):,}",
                             f"{rng.randint(1, 9)} million", f"{rng.randint(1, 99)}.{rng.randint(1, 9)} billion", "0.07", "0.5"])
        yield rng.choice([f"{sym}{amount}", f"{sym} {amount}", f"{amount}{sym}", f"it costs {sym}{amount}.",
                          f"{sym}{amount} and ¢{rng.randint(1, 99)}"])
    units = ["dollars", "dollar", "pounds", "pound", "euros", "euro", "cents", "cent", "yen", "rupees", "pence", "bucks"]
    for _ in range(80):
        n = int_to_words(rng.randint(1, 999))
        c = int_to_words(rng.randint(1, 99))
        u = rng.choice(units)
        yield rng.choice([f"{n} {u}", f"{n} {u} and {c} cents", f"{n} {u} {c}", f"{rng.randint(1, 99)} {u}", f"a {u}",
                          f"{n} million {u}", f"{n} percent", f"{n} per cent", f"{rng.randint(1, 100)}%", f"{rng.randint(1, 100)} %"])
    yield from ["$20 million", "$2 and 7 cents", "$2 and ¢7", "$0.07", "$0 7", "twenty dollars and fifty cents", "one pound fifty",
                "£3.50", "€1,000", "¢50", "$", "the $ sign", "$$$", "5$", "$5.", "$.50", "$ 5", "USD 5", "EUR 10", "10 USD",
                "a dollar fifty", "half a dollar", "a hundred dollars", "one hundred dollars and one cent", "50 percent of $10",
                "per cent", "5 per cent", "5 percent", "5%", "5 %", "%5", "100% sure", "cent", "two cents", "one cent",
                "minus 5 dollars", "plus 5 euros", "$1", "£1", "1 dollar", "1 euro", "€0.99", "¥100", "₹500"]


def _cases_spellings(rng: random.Random) -> Iterator[str]:
    words = sorted(leaderboard_spellings())
    for i in range(0, len(words), 8):
        yield " ".join(words[i:i + 8])
    for w in rng.sample(words, 120):
        yield rng.choice([w.capitalize() + ".", f"the {w}", f"{w.upper()}!", f"{w}'s", f"{w}-{w}"])
    for w in SPELLING_EDITS:
        yield f"the {w} list" if " " not in w else w
    yield from ["colour colours coloured", "Flyer", "flier", "OK, okay.", "kay", "'kay", "ok?", "Ok", "okey", "archaeological dig",
                "the cancellation fee", "travelogue", "the travelog", "pummelled", "snowploughs", "archaeology", "archeology",
                "labour labor", "centre center", "theatre", "programme", "analyse", "judgement", "cheque", "grey", "tyre"]


def _cases_contractions(rng: random.Random) -> Iterator[str]:
    for w, _ in WORD_EXPANSIONS:
        yield f"I {w} go"
        yield w.capitalize() + "."
    for abbr, _ in TITLES:
        yield f"{abbr.capitalize()}. Smith"
        yield f"{abbr.upper()} Jones and {abbr}"
    for c, _ in PERFECT_TENSES:
        yield f"he{c} there"
        yield f"John{c} away"
    for w in IS_CONTRACTION_WORDS:
        yield f"{w.capitalize()}'s here"
        yield f"{w}'s"
    for c, _ in CONTRACTION_SUFFIXES:
        yield f"they{c} fine"
        yield f"can{c}"
    yield from ["kinda", "sorta", "dunno", "'cause", "cause", "because", "John's car", "James' car", "it's", "its", "It’s",
                "don’t", "don ' t", "don 't", "I 'm", "we' re", "y'all'd've", "shouldn't've", "o'clock", "rock 'n' roll", "'90s",
                "the '80s", "ma'am", "Ma'am,", "let's", "let us", "won't", "wont", "can't", "cannot", "ain't", "i'ma", "imma",
                "gonna", "wanna", "gotta", "woulda", "coulda", "shoulda", "she's been", "she's gone", "he's got", "he's done",
                "who's who", "there's", "here's", "how's", "when's", "where's", "why's", "this's", "that's", "what's",
                "everyone's", "nobody's", "let's go", "St. John's", "Dr. Who", "Mrs. Brown's", "Prof. X", "Lt. Col. Smith",
                "Gen. Sen. Rep. Pres. Rev. Hon.", "Asst. Assoc. Jr. Sr. Esq.", "Capt. Gov. Ald.", "mr.mrs.", "Mr.Smith"]


def _cases_punctuation(rng: random.Random) -> Iterator[str]:
    yield from [
        "[noise]", "<unk>", "(laughs)", "hello [inaudible] world", "a <b> c", "(x) (y)", "()", "( )", "a (b c", "a [b c", "a < b > c",
        "[a] <b> (c) ()", "x [y ]", "x <y ] z", "a]b[c", ">a<", "((nested) text)", "[[double]]", "(a)(b)(c)", "a (b) c) d",
        "Hello, world!", "Wait... what?!", "well -- maybe", "yes; no: maybe", "\"quoted\"", "'single'", "`back`", "a/b", "a\\b",
        "a|b", "a~b", "a^b", "a*b", "a+b", "a=b", "a#b", "#hashtag", "@user", "a@b.com", "www.example.com", "http://x.org/a?b=c",
        "file.txt", "U.S.-based", "end.", "end. ", ". start", "3.5.", "a.b.c", "...", ".", ",", "", " ", "  \t\n ", "a\nb",
        "a\r\nb", "tab\tseparated", "   leading and trailing   ", "mid  dle   spaces", "Dr.", "etc.", "e.g.", "No. 5", "no.5",
        "5.00.", "$5.00.", "5%.", "%", "$", "¢", "€", "£", ".%$", "a % b", "a $ b", "a . b", "5 . 5", "5,5", "5, 5", "5 ,5",
        "1,000.5", "one, two, three", "yes!!!", "no???", "hmm?!", "-", "--", "—", "a - b", "a—b", "a_b", "snake_case_word",
        "CamelCase", "ALL CAPS", "x's", "'", "''", "' '", " ' ", "''hello''", "it ' s", "a '", "' b",
    ]
    chars = list("[]()<>{}.,;:!?\"'`-—–_/\\|@#%$&*+=~^") + ["...", " "]
    for _ in range(60):
        yield "".join(rng.choice(chars + ["a", "b", "word", "5", " "]) for _ in range(rng.randint(1, 12)))


def _cases_unicode(rng: random.Random) -> Iterator[str]:
    yield from [
        "café", "naïve", "résumé", "Œuvre", "œuvre", "straße", "STRASSE", "ẞ", "Ærø", "ðþ", "Łódź", "Đorđe", "façade", "jalapeño",
        "Zoë", "coöperate", "São Paulo", "Mötley Crüe", "Ångström", "‘quoted’", "“double”", "it’s", "don’t", "a\u00a0b",
        "a\u2009b", "a\u200bb", "zero\u200dwidth", "a\ufeffb", "ﬁne", "ﬂour", "™", "©2024", "®", "°C", "5°", "½ cup", "¾",
        "x²", "H₂O", "１２３", "ＡＢＣ", "ｈｅｌｌｏ", "①②", "Ⅻ", "ⅸ", "٣", "٣٤٥", "१२३", "٣ dollars", "Привет мир", "Ελληνικά", "日本語",
        "中文 text", "한국어", "עברית", "العربية", "ไทย", "emoji 😀 here", "👍🏽", "❤️", "🇺🇸", "e\u0301", "n\u0303", "a\u0308",
        "\u0301", "ǅ", "ﬀ", "ℌ", "ℍ", "𝐁𝐨𝐥𝐝", "…", "‰", "′", "″", "§5", "¶", "•", "·", "‹a›", "«a»", "„a“", "¿qué?", "¡sí!",
        "İstanbul", "ß", "ǈ", "ŉ", "Kelvin K", "Ω", "µ", "€5", "₤5", "＄5", "5￠", "₠", "\u2028", "\u00ad", "a\u0332b", "क्षि",
        "ﷺ", "ﷲ", "Å", "Å", "Ǆ", "ﾊﾝｶｸ", "ｶﾞ", "㎞", "㍿", "№ 5", "℃", "⅓", "⁴", "₅", "Ⓐ", "🄰", "\x00", "\x7f", "a\x1cb",
    ]
    alphabet = "aeiouéèêëàâäîïôöùûüçñßæœøåłđþ’‘“”—–…€£$¢%.,'-_ 0123456789٣١½²"
    for _ in range(60):
        yield "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 20)))


def _cases_pathological() -> Iterator[str]:
    """Texts on which the leaderboard's bracket, parenthesis and apostrophe patterns take quadratic time (kept short here)."""
    yield from ["a" + "<" * 300, "(" * 200 + "x", "[a] <b> (c) ()" * 20, "x [y " * 50 + "]", " (" * 150, "<" * 100 + ">" * 100,
                " " * 400 + "x'", "x" + " " * 400 + "'s", "et" + " " * 300 + "cetera", "a" + " " * 300 + "m", "1" + " " * 300 + "st",
                "one " * 200, "oh " * 150 + "hundred", "1 " * 200, "point one " * 100, "and a half " * 50, "$1 " * 100,
                "a b " * 100, "it's " * 100, ". " * 200, "-" * 300, "'" * 200, "' " * 200, "9" * 300, "9" * 300 + " decillion",
                "double " * 100 + "one", "one two three four five six seven eight nine " * 20]


def _cases_voxpopuli() -> Iterator[str]:
    for path in sorted(VOXPOPULI.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            yield row["text"]
            yield row["pred_text"]


# fmt: on


def _cases_mixed(rng: random.Random, pool: list[str]) -> Iterator[str]:
    tokens = sorted({t for text in pool for t in text.split()})
    for _ in range(500):
        yield " ".join(rng.choice(tokens) for _ in range(rng.randint(1, 14)))


def build_inputs() -> list[dict[str, str]]:
    """Every input once, with the category of its first appearance."""
    rng = random.Random(SEED)
    groups = [
        ("fillers", _cases_fillers(rng)),
        ("compounds", _cases_compounds(rng)),
        ("acronyms", _cases_acronyms(rng)),
        ("names", _cases_names(rng)),
        ("numbers", _cases_numbers(rng)),
        ("currencies", _cases_currencies(rng)),
        ("spellings", _cases_spellings(rng)),
        ("contractions", _cases_contractions(rng)),
        ("punctuation", _cases_punctuation(rng)),
        ("unicode", _cases_unicode(rng)),
        ("pathological", _cases_pathological()),
        ("voxpopuli", _cases_voxpopuli()),
    ]
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for category, texts in groups:
        for text in texts:
            if text not in seen:
                seen.add(text)
                out.append({"category": category, "input": text})
    for text in _cases_mixed(rng, [r["input"] for r in out]):
        if text not in seen:
            seen.add(text)
            out.append({"category": "mixed", "input": text})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="JSONL file to write")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    rows = build_inputs()
    with args.out.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["category"]] = counts.get(row["category"], 0) + 1
    log.info("%d inputs: %s", len(rows), ", ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
