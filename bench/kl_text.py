#!/usr/bin/env python3
"""Writes a deterministic English text of short children's stories (the register of the TinyStories data
that stories260K was trained on) for bench/quant_kl.sh: `kl_text.py [SEED] > text.txt`. Written here, from
word lists and sentence patterns, so that the KL-divergence figures can be reproduced without a corpus."""
import random
import sys

NAMES = ["Lily", "Tom", "Ben", "Mia", "Sam", "Anna", "Max", "Lucy", "Timmy", "Sue", "Jack", "Zoe"]
ANIMALS = ["dog", "cat", "bird", "bunny", "frog", "duck", "fish", "bear", "mouse", "horse"]
THINGS = ["ball", "kite", "box", "cake", "hat", "boat", "toy car", "book", "red balloon", "shiny stone"]
PLACES = ["park", "garden", "beach", "forest", "house", "school", "farm", "river", "hill", "shop"]
FEELINGS = ["happy", "sad", "scared", "excited", "tired", "proud", "angry", "surprised", "curious"]
ADJS = ["big", "small", "pretty", "old", "soft", "loud", "funny", "brave", "kind", "shiny"]
VERBS = ["played", "ran", "jumped", "laughed", "looked around", "sang a song", "danced", "sat down"]


def story(r: random.Random) -> str:
    n, m = r.sample(NAMES, 2)
    a, t, p = r.choice(ANIMALS), r.choice(THINGS), r.choice(PLACES)
    f1, f2 = r.sample(FEELINGS, 2)
    adj = r.choice(ADJS)
    kid = r.choice(["girl", "boy"])
    s = [r.choice([f"Once upon a time, there was a little {kid} named {n}.",
                   f"One day, a {adj} {a} lived near the {p}.",
                   f"{n} was a {adj} {kid} who loved to play.",
                   f"There was a {adj} {t} in the {p}."])]
    for _ in range(r.randint(3, 7)):
        s.append(r.choice([
            f"{n} went to the {p} with {r.choice(['mom', 'dad', 'a friend', m])}.",
            f"{n} saw a {r.choice(ADJS)} {a} and said, \"Hello, little {a}!\"",
            f"The {a} {r.choice(VERBS)} and {n} felt {f1}.",
            f"{m} wanted the {t}, but {n} did not want to share.",
            f"\"Can I play with your {t}?\" asked {m}.",
            f"They {r.choice(VERBS)} all day in the {p}.",
            f"Suddenly, it started to rain, and {n} was {f2}.",
            f"{n} found a {r.choice(ADJS)} {r.choice(THINGS)} under a tree.",
            f"Mom said, \"Be careful, {n}. The {p} is {r.choice(ADJS)}.\"",
            f"{m} gave {n} a hug, and they were friends again.",
        ]))
    s.append(r.choice([f"In the end, {n} and {m} were very {r.choice(FEELINGS)}.",
                       f"{n} learned that sharing is good.",
                       "They all went home and had a nice dinner.",
                       f"From that day on, {n} always took care of the {a}."]))
    return " ".join(s)


def main() -> None:
    r = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
    sys.stdout.write("\n\n".join(story(r) for _ in range(600)) + "\n")


if __name__ == "__main__":
    main()
