"""Sentences of the embedded demo corpus, written for this project.

The sentences are chosen for what later probes need: numbers written as digits and as words
(years, amounts, percentages, times), proper nouns that are not sentence-initial (masked-word
probe) and words whose spelling has more than one accepted form (orthographic-switch probe:
Mr./mister, Mrs., Dr./doctor, colour/color, favourite/favorite, centre/center, organise/organize,
percent/%, OK/okay, $ amounts).

``Sentence.text`` is the reference exactly as a person would write it. ``Sentence.say`` is an
optional spoken form fed to the synthesizer when a TTS engine misreads the written form (espeak-ng
reads "$1,200" as "dollar one thousand two hundred"); it must be a faithful reading of ``text``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Number words a normalizer would turn into digits (used to detect spelled-out numbers).
NUMBER_WORDS: frozenset[str] = frozenset(
    [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
        "thirty",
        "forty",
        "fifty",
        "sixty",
        "seventy",
        "eighty",
        "ninety",
        "hundred",
        "thousand",
        "million",
        "billion",
        "first",
        "second",
        "third",
        "twice",
    ]
)

# Spelling families the orthographic-switch probe looks for (lower-case surface forms).
SPELLING_VARIANTS: dict[str, tuple[str, ...]] = {
    "mister": ("mr.", "mister"),
    "missus": ("mrs.",),
    "doctor": ("dr.", "doctor"),
    "colour": ("colour", "color"),
    "favourite": ("favourite", "favorite"),
    "centre": ("centre", "center"),
    "organise": ("organise", "organize", "organised", "organized"),
    "neighbour": ("neighbour", "neighbor"),
    "theatre": ("theatre", "theater"),
    "percent": ("percent", "%"),
    "okay": ("ok", "okay"),
    "dollar": ("$", "dollars"),
}


@dataclass(frozen=True)
class Sentence:
    """A reference sentence, its proper nouns and (only when needed) its spoken form for TTS."""

    text: str
    proper_nouns: tuple[str, ...] = ()
    say: str | None = None

    @property
    def tts_text(self) -> str:
        """What the synthesizer is given: the spoken form when one is set, else the reference."""
        return self.say if self.say is not None else self.text


def _s(text: str, *proper_nouns: str, say: str | None = None) -> Sentence:
    return Sentence(text=text, proper_nouns=tuple(proper_nouns), say=say)


SENTENCES: tuple[Sentence, ...] = (
    _s("Mr. Alvarez moved to Denver in 2016 with his two daughters.", "Alvarez", "Denver"),
    _s("Mrs. Thompson said the colour of the new kitchen was perfect.", "Thompson"),
    _s("Dr. Nakamura will present the results at the Boston conference on Friday.", "Nakamura", "Boston", "Friday"),
    _s("The price of petrol rose by 12 percent between March and June.", "March", "June"),
    _s("Only 8% of the students at Oxford chose the evening course.", "Oxford"),
    _s(
        "My favourite bakery in Dublin sells bread for $4 a loaf.",
        "Dublin",
        say="My favourite bakery in Dublin sells bread for four dollars a loaf.",
    ),
    _s("The centre of Manchester was quiet after the match on Sunday.", "Manchester", "Sunday"),
    _s("We need to organise the files before Amazon sends the invoices.", "Amazon"),
    _s("Is it OK if Priya borrows the car until Tuesday?", "Priya", "Tuesday"),
    _s("That sounds okay to me, said Mr. Chen from the front row.", "Chen"),
    _s("The museum in Chicago reopened in 1998 after a long renovation.", "Chicago"),
    _s("Her favorite color is green, according to her sister Elena.", "Elena"),
    _s("The new community center in Phoenix opens at nine every morning.", "Phoenix"),
    _s("Then Doctor Okafor asked the nurse to organize the schedule for March.", "Okafor", "March"),
    _s("Our friend Mister Davies has worked for the BBC for twenty three years.", "Davies", "BBC"),
    _s("Unemployment in Spain fell to 14 percent last spring.", "Spain"),
    _s("The company Siemens hired 350 engineers in 2019.", "Siemens"),
    _s(
        "A ticket to Paris costs about $120 if you book early.",
        "Paris",
        say="A ticket to Paris costs about one hundred and twenty dollars if you book early.",
    ),
    _s("The river Thames flows through London and out to the sea.", "Thames", "London"),
    _s("Nearly forty thousand people watched the final in Melbourne.", "Melbourne"),
    _s("In 1969 Neil Armstrong walked on the Moon.", "Neil", "Armstrong", "Moon"),
    _s("The recipe needs 3 eggs, 200 grams of flour and a pinch of salt."),
    _s("Our flight to Tokyo leaves at 6:45 on Thursday morning.", "Tokyo", "Thursday"),
    _s("Professor Lindqvist from Uppsala University gave the opening talk.", "Lindqvist", "Uppsala", "University"),
    _s(
        "The charity Oxfam raised $2 million for flood relief.",
        "Oxfam",
        say="The charity Oxfam raised two million dollars for flood relief.",
    ),
    _s("Last week Mrs. Garcia paid the plumber fifty dollars in cash.", "Garcia"),
    _s("The train from Glasgow to Edinburgh takes about fifty minutes.", "Glasgow", "Edinburgh"),
    _s("Inflation reached 9.1 percent in June 2022, the highest in forty years.", "June"),
    _s("Please call Dr. Brennan before 5 o'clock tomorrow.", "Brennan"),
    _s("The team from Nairobi won the relay by 2 seconds.", "Nairobi"),
    _s(
        "Samsung and Google announced a partnership worth $500 million.",
        "Samsung",
        "Google",
        say="Samsung and Google announced a partnership worth five hundred million dollars.",
    ),
    _s("My neighbour Kofi grows tomatoes in the back garden.", "Kofi"),
    _s("The theatre on Broadway was full for the premiere.", "Broadway"),
    _s("About 60% of the voters in Ohio supported the plan.", "Ohio"),
    _s("Then Mr. Singh asked if the report was okay to send to Microsoft.", "Singh", "Microsoft"),
    _s("The conference in Geneva will organise workshops on climate and health.", "Geneva"),
    _s("We drove 300 miles from Atlanta to Nashville in one day.", "Atlanta", "Nashville"),
    _s("The bakery sold 1,500 croissants during the Easter weekend.", "Easter"),
    _s("The old lighthouse near Cork was built in 1853.", "Cork"),
    _s("Maria said the blue sofa is her favourite piece of furniture.", "Maria"),
    _s("The World Health Organization published new guidelines in 2021.", "World", "Health", "Organization"),
    _s("Tickets for the concert in Berlin sold out in ten minutes.", "Berlin"),
    _s("Every Monday Mrs. Robinson teaches mathematics at a school in Leeds.", "Monday", "Robinson", "Leeds"),
    _s("The shopping centre near Heathrow closes at ten in the evening.", "Heathrow"),
    _s("The population of Canada passed 40 million in 2023.", "Canada"),
    _s("According to Dr. Ahmed the new clinic will open in September.", "Ahmed", "September"),
    _s("Is everything OK with the delivery to Rotterdam?", "Rotterdam"),
    _s("The painter mixed a warm colour for the sunset over Lisbon.", "Lisbon"),
    _s("Sales at Nike grew by 7 percent in the third quarter.", "Nike"),
    _s("Last summer Mister Kowalski fixed the roof for two hundred dollars.", "Kowalski"),
    _s("The color of the sky over Arizona changed at sunset.", "Arizona"),
    _s("Our favorite restaurant in Seattle serves fresh salmon every day.", "Seattle"),
    _s("The city of Toronto plans to plant 100,000 trees by 2030.", "Toronto"),
    _s("Jonathan ran the London marathon in three hours and twelve minutes.", "London"),
    _s("The library at Harvard holds more than 20 million books.", "Harvard"),
    _s("A cup of tea in Mumbai costs less than 50 cents.", "Mumbai"),
    _s("The engineers at Boeing tested the new wing for 6 weeks.", "Boeing"),
    _s("My grandmother was born in Naples in 1941.", "Naples"),
    _s("The bus to Brighton is okay but the train is faster.", "Brighton"),
    _s(
        "They organized a bake sale and raised $350 for the hospital.",
        say="They organized a bake sale and raised three hundred and fifty dollars for the hospital.",
    ),
    _s("The science centre in Cardiff is popular with families.", "Cardiff"),
    _s("Around 25% of the budget goes to schools in Texas.", "Texas"),
    _s(
        "Yesterday Mr. O'Brien bought a used bicycle for $80.",
        "O'Brien",
        say="Yesterday Mr. O'Brien bought a used bicycle for eighty dollars.",
    ),
    _s("Mrs. Patel and her son visited the Louvre in April.", "Patel", "Louvre", "April"),
    _s("The storm knocked out power to 12,000 homes in Florida.", "Florida"),
    _s("The student from Ghana scored 98 percent on the final exam.", "Ghana"),
    _s("I think the plan is OK, but ask Dr. Weber first.", "Weber"),
    _s("The orchestra in Vienna performed the symphony twice in 2018.", "Vienna"),
    _s("Please organise a meeting with the team from Singapore next week.", "Singapore"),
    _s("Her favourite city is Barcelona because of the food and the beaches.", "Barcelona"),
    _s("The farmers in Iowa harvested the corn three weeks early this year.", "Iowa"),
    _s(
        "A new bridge across the Hudson will cost $4 billion.",
        "Hudson",
        say="A new bridge across the Hudson will cost four billion dollars.",
    ),
)

_DIGITS = re.compile(r"\d")


def words(text: str) -> list[str]:
    """Whitespace tokens with surrounding sentence punctuation removed (keeps $, %, Mr.)."""
    out = []
    for tok in text.split():
        tok = tok.strip(',;?!"')
        if tok.endswith(".") and tok.lower() not in {"mr.", "mrs.", "dr."}:
            tok = tok[:-1]
        if tok:
            out.append(tok)
    return out


def number_tokens(text: str) -> list[str]:
    """Tokens that are numbers: anything with a digit, or a number word."""
    return [w for w in words(text) if _DIGITS.search(w) or w.lower() in NUMBER_WORDS]


def spelling_variant_tokens(text: str) -> dict[str, list[str]]:
    """Map spelling family -> the surface forms of that family that occur in ``text``."""
    toks = [w.lower() for w in words(text)]
    found: dict[str, list[str]] = {}
    for family, forms in SPELLING_VARIANTS.items():
        hits = []
        for tok in toks:
            for form in forms:
                if tok == form or (form in {"%", "$"} and form in tok):
                    hits.append(form)
        if hits:
            found[family] = sorted(set(hits))
    return found


def text_info(sentence: Sentence) -> dict[str, object]:
    """JSON-able facts about a sentence that probes use (proper nouns, numbers, spelling forms)."""
    return {
        "proper_nouns": list(sentence.proper_nouns),
        "numbers": number_tokens(sentence.text),
        "spelling_variants": spelling_variant_tokens(sentence.text),
    }
