"""Record file names: the kebab-case slug of a title, and whether a file name is one `adr new` would write."""
import re
import unicodedata

RECORD_NAME = re.compile(r"^(?P<number>\d{4})-(?P<slug>.+)\.md$")
MAX_SLUG = 60  # characters of a title's slug in a file name: a long title still makes a name the system takes

# Latin letters that NFKD does not take apart into an ASCII letter and accents.
_LATIN = {"ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "đ": "d", "ð": "d", "þ": "th", "ł": "l", "ı": "i", "ħ": "h",
          "ŧ": "t", "ŋ": "ng"}


def slug(title):
    """The kebab-case file-name form of ``title``: "Graph file format (v1)" -> "graph-file-format-v1".

    Letters with an ASCII form lose their accents ("über" -> "uber", "Straße" -> "strasse"); letters with none
    (Cyrillic, Greek, CJK, ...) are kept with their marks, lower-cased, in NFC; anything else separates words.
    At most ``MAX_SLUG`` characters, cut after the last whole word that fits (a longer first word is cut
    between two letters)."""
    return _shortened(_full_slug(title))


def _shortened(text):
    if len(text) <= MAX_SLUG:
        return text
    cut = text.rfind("-", 0, MAX_SLUG + 1)
    if cut > 0:
        return text[:cut]
    cut = MAX_SLUG
    while cut > 1 and _is_mark(text[cut]):  # never between a letter and its accent
        cut -= 1
    return text[:cut]


def _full_slug(title):
    words, word = [], ""
    for cluster in _clusters(unicodedata.normalize("NFC", title.lower())):
        plain = "".join(c for c in unicodedata.normalize("NFKD", cluster) if not _is_mark(c))
        if plain.isascii():
            pieces = re.split(r"[^a-z0-9]+", plain.lower())
        elif cluster[0] in _LATIN:
            pieces = [_LATIN[cluster[0]]]
        else:
            pieces = [cluster] if cluster[0].isalnum() else ["", ""]
        for piece in pieces[:-1]:          # a separator follows each piece but the last
            words.append(word + piece)
            word = ""
        word += pieces[-1]
    words.append(word)
    return unicodedata.normalize("NFC", "-".join(word for word in words if word))


def _clusters(text):
    """A base character with the combining marks after it, one at a time."""
    cluster = ""
    for char in text:
        if cluster and not _is_mark(char):
            yield cluster
            cluster = ""
        cluster += char
    if cluster:
        yield cluster


def record_number(name):
    """The number of a file named ``NNNN-slug.md`` where the slug is one `adr new` would write, else None.

    A slug longer than ``MAX_SLUG`` (a record named by hand, or before titles were cut) is accepted too."""
    match = RECORD_NAME.match(unicodedata.normalize("NFC", name))
    if match is None or _full_slug(match.group("slug")) != match.group("slug"):
        return None
    return int(match.group("number"))


def _is_mark(char):
    return unicodedata.category(char).startswith("M")
