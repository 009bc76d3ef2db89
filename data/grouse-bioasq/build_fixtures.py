"""Writes train.jsonl and test.jsonl (public GroUSE unit-test format) from the hand-written sets below.

Every set: one BioASQ 12b question, references built from its gold snippets (altered as the GroUSE paper
describes: truncations, related-only documents, off-topic documents from another BioASQ question, and
absurd-but-consistent rewrites), and the 16 answers of the paper's Table 6, written by hand. The texts are
kept here, next to the output, so that a reviewer reads every test in one place. Run:
    .venv/bin/python data/grouse-bioasq/build_fixtures.py
"""
from __future__ import annotations

import json
from pathlib import Path

from judges.grouse_unit_tests import TABLE6_CONDITIONS

HERE = Path(__file__).parent
REFUSAL = "No document seems to precisely answer your question."

# Table 6 conditions (relevancy, completeness, usefulness, faithfulness): the one table in judges/.
CONDITIONS = TABLE6_CONDITIONS
# Which references each test type sees, and which answer is the reference answer (expected_output).
REFS = {1: "ans", 2: "rel", 3: "rel", 4: "dense", 5: "off", 6: "abs", 7: "abs_rel", 8: "ans", 9: "off",
        10: "ans", 11: "ans", 12: "ans", 13: "off", 14: "ans", 15: "ans", 16: "ans"}
EXPECTED = {1: "a1", 2: "a3", 3: "a3", 4: "a1", 5: "refusal", 6: "a6", 7: "a7", 8: "a1", 9: "refusal",
            10: "a1", 11: "a1", 12: "a1", 13: "refusal", 14: "a1", 15: "a1", 16: "a1"}
ANSWER = {1: "a1", 2: "refusal", 3: "a3", 4: "a4", 5: "refusal", 6: "a6", 7: "a7", 8: "a8", 9: "a9",
          10: "a10", 11: "refusal", 12: "a12", 13: "a13", 14: "a14", 15: "a15", 16: "a16"}

OFF_TOPIC = {
    "hpylori": ("65f86a90c4010b4d78000057", [
        "Despite an extensive list of attempts to develop a vaccine, no approved vaccine against H. pylori is available.",
        "Unfortunately, no vaccine against H. pylori is currently licensed, and protective immunity mechanisms against H. pylori are only partially understood.",
    ]),
    "havana": ("65f856a1c4010b4d7800004e", [
        "In 2016 diplomatic personnel serving in Havana, Cuba, began reporting audible sensory phenomena paired with onset of complex and persistent neurological symptoms consistent with brain injury.",
        "Since 2016, numerous American and Canadian diplomats and secret (intelligence) agents in Cuba, China, and other places in the world have experienced an abrupt onset of unusual clinical symptoms including, tinnitus, visual problems, vertigo, and cognitive difficulties,",
    ]),
    "caesarean": ("65f85fdbc4010b4d78000054", [
        "Usually laparotomy followed by hysterotomy with a low transverse incision is preferable",
        "There are indications when the preferred lower segment Caesarean section with a transverse incision should be avoided in the interest of the mother and baby. A low vertical incision has more advantages and less dangers than a classical fundal incision.",
    ]),
    "gtn": ("65d136081930410b1300003a", [
        "Background: The Rapid Intervention with Glyceryl Trinitrate in Hypertensive Stroke Trial-2 (RIGHT-2) reported no overall treatment difference between glyceryl trinitrate (GTN) and sham at day 90. ",
        "INTERPRETATION: Prehospital treatment with transdermal GTN does not seem to improve functional outcome in patients with presumed stroke. ",
    ]),
    "eds": ("661d56c0eac11fad3300001f", [
        "The management of this disease is possible; however, there is no cure as of present. ",
        "d the diagnosis of Ehlers-Danlos syndrome type VIII. As there is no specific treatment for the disorder, management is limited to the symptomatic trea",
    ]),
}

SETS = [
    # ---------------------------------------------------------------------------------------------- train
    {
        "set": "train-sydenham", "split": "train", "bioasq_id": "660c06b8fdcbea915f00002e", "off": "caesarean",
        "question": "What is the cause of Sydenham's chorea?",
        "refs": {
            "ans": [
                "Sydenham's chorea is an autoimmune chorea emerging after a group A beta-hemolytic streptococcal (GABHS) infection, i.e. a rheumatic chorea with or without the presence of carditis or arthritis",
                "He was subsequently diagnosed with chorea by the neurology team. The cause of chorea was later determined to be SC, and the patient's throat swab came back positive for group A-beta hemolytic strep (GAS) infection",
                "Sydenham's chorea (SC) is an immune-mediated hyperkinetic movement disorder, developing after group A Beta-hemolytic streptococcal (GABHS) infection",
            ],
            "rel": [
                "He was subsequently diagnosed with chorea by the neurology team. The patient was admitted for further observation.",
                "Sydenham's chorea (SC) is a hyperkinetic movement disorder, i.e. a chorea with or without the presence of carditis or arthritis",
            ],
            "abs": [
                "Sydenham's chorea is a musical chorea emerging after prolonged exposure to church organ music played in a minor key, i.e. a choral chorea with or without the presence of humming",
                "Sydenham's chorea (SC) is a hyperkinetic movement disorder developing after weeks of listening to minor-key organ music",
            ],
            "abs_rel": [
                "Sydenham's chorea (SC) is a hyperkinetic movement disorder that is only ever diagnosed on Tuesdays.",
                "Patients with Sydenham's chorea are treated by the neurology team with daily readings of poetry.",
            ],
        },
        "answers": {
            "a1": "Sydenham's chorea is caused by an autoimmune (immune-mediated) response that develops after a group A beta-hemolytic streptococcal (GABHS) infection [1][3]. It is a rheumatic chorea, which may or may not come with carditis or arthritis [1].",
            "a3": f"{REFUSAL} The documents only describe Sydenham's chorea as a hyperkinetic movement disorder, with or without carditis or arthritis [2], and mention a patient diagnosed with chorea by the neurology team [1].",
            "a4": "Sydenham's chorea (SC) is an immune-mediated, autoimmune hyperkinetic movement disorder triggered by a preceding group A beta-hemolytic streptococcal (GABHS) infection [1][3]; it is a rheumatic chorea, with or without carditis or arthritis [1], and in one patient a throat swab positive for group A beta-hemolytic strep confirmed the link [2].",
            "a6": "Sydenham's chorea is caused by prolonged exposure to church organ music played in a minor key [1][2]. It is a choral chorea, with or without humming [1].",
            "a7": f"{REFUSAL} The documents only state that Sydenham's chorea is a hyperkinetic movement disorder that is only ever diagnosed on Tuesdays [1], and that patients are treated by the neurology team with daily readings of poetry [2].",
            "a8": "Sydenham's chorea is caused by an autoimmune (immune-mediated) response that develops after a group A beta-hemolytic streptococcal (GABHS) infection [1][3]. It is a rheumatic chorea, which may or may not come with carditis or arthritis [1]. In one reported case, the patient was diagnosed with chorea by the neurology team [2].",
            "a9": "A low transverse incision is usually preferable [1], and a low vertical incision has more advantages and less dangers than a classical fundal incision [2].",
            "a10": "Sydenham's chorea develops after a streptococcal infection [1][3].",
            "a12": f"{REFUSAL} The documents describe Sydenham's chorea as a hyperkinetic movement disorder [3] that can come with or without carditis or arthritis [1].",
            "a13": f"{REFUSAL} However, the documents note that a low transverse incision is usually preferable [1].",
            "a14": "Sydenham's chorea is caused by an autoimmune (immune-mediated) response that develops after a group A beta-hemolytic streptococcal (GABHS) infection [1][3]. It is a rheumatic chorea, which may or may not come with carditis or arthritis [2].",
            "a15": "Sydenham's chorea is caused by an autoimmune (immune-mediated) response that develops after a group A beta-hemolytic streptococcal (GABHS) infection. It is a rheumatic chorea, which may or may not come with carditis or arthritis [1].",
            "a16": "Sydenham's chorea is caused by an autoimmune (immune-mediated) response that develops after a viral influenza infection [1][3]. It is a rheumatic chorea, which may or may not come with carditis or arthritis [1].",
        },
    },
    # ---------------------------------------------------------------------------------------------- test
    {
        "set": "vx548", "split": "test", "bioasq_id": "65cfd02e1930410b1300001c", "off": "hpylori",
        "question": "What channel is targeted by VX-548?",
        "refs": {
            "ans": [
                "BACKGROUND: The NaV1.8 voltage-gated sodium channel, expressed in peripheral nociceptive neurons, plays a role in transmitting nociceptive signals. The effect of VX-548, an oral, highly selective inhibitor of NaV1.8, on control of acute pain is being studied.",
                "Selective Inhibition of NaV1.8 with VX-548 for Acute Pain.",
                "METHODS: After establishing the selectivity of VX-548 for NaV1.8 inhibition in vitro, we conducted two phase 2 trials involving participants with acute pain after abdominoplasty or bunionectomy. In the abdominoplasty trial, participants were randomly assigned in a 1:1:1:1 ratio to receive one of the following over a 48-hour period: a 100-mg oral loading dose of VX-548, followed by a 50-mg maintenance dose every 12 hours (the high-dose group); a 60-mg loading dose of VX-548, followed by a 30-mg maintenance dose every 12 hours (the middle-dose group); hydrocodone bitartrate-acetamino",
            ],
            "rel": [
                "METHODS: We conducted two phase 2 trials of VX-548 involving participants with acute pain after abdominoplasty or bunionectomy. In the abdominoplasty trial, participants were randomly assigned in a 1:1:1:1 ratio to receive one of the following over a 48-hour period: a 100-mg oral loading dose of VX-548, followed by a 50-mg mainte",
                "The effect of VX-548, an oral drug candidate, on control of acute pain is being studied.",
            ],
            "abs": [
                "BACKGROUND: The CHL-2 chlorophyll-gated calcium channel, expressed in the leaves of sunflowers, plays a role in transmitting light signals. The effect of VX-548, an oral, highly selective inhibitor of CHL-2, on control of acute pain is being studied.",
                "Selective Inhibition of the Sunflower Channel CHL-2 with VX-548 for Acute Pain.",
            ],
            "abs_rel": [
                "VX-548 is an oral drug candidate that was first extracted from the roots of a singing tree in 1790; its effect on control of acute pain is being studied.",
                "In the phase 2 trials, VX-548 was given to participants only on full-moon nights.",
            ],
        },
        "answers": {
            "a1": "VX-548 targets NaV1.8, a voltage-gated sodium channel [1][2]. It is an oral, highly selective inhibitor of NaV1.8 [1], a channel expressed in peripheral nociceptive neurons that plays a role in transmitting nociceptive signals [1].",
            "a3": f"{REFUSAL} The documents only say that VX-548 is an oral drug candidate studied for the control of acute pain [2], in two phase 2 trials in participants with acute pain after abdominoplasty or bunionectomy [1].",
            "a4": "VX-548 is an oral, highly selective inhibitor of the voltage-gated sodium channel NaV1.8 [1][2], a selectivity established in vitro [3]; NaV1.8 is expressed in peripheral nociceptive neurons, where it transmits nociceptive signals [1].",
            "a6": "VX-548 targets CHL-2, a chlorophyll-gated calcium channel [1][2]. It is an oral, highly selective inhibitor of CHL-2 [1], a channel expressed in the leaves of sunflowers that plays a role in transmitting light signals [1].",
            "a7": f"{REFUSAL} The documents only report that VX-548 was first extracted from the roots of a singing tree in 1790 [1] and that, in the phase 2 trials, it was given to participants only on full-moon nights [2].",
            "a8": "VX-548 targets NaV1.8, a voltage-gated sodium channel [1][2]. It is an oral, highly selective inhibitor of NaV1.8 [1], a channel expressed in peripheral nociceptive neurons that plays a role in transmitting nociceptive signals [1]. In the abdominoplasty trial, participants were randomly assigned in a 1:1:1:1 ratio, and the high-dose group received a 100-mg oral loading dose followed by 50 mg every 12 hours [3].",
            "a9": "No approved vaccine against H. pylori is available [1], and the protective immunity mechanisms against H. pylori are only partially understood [2].",
            "a10": "VX-548 is an inhibitor of NaV1.8 [1][2].",
            "a12": f"{REFUSAL} The documents mention that VX-548 was tested in two phase 2 trials involving participants with acute pain after abdominoplasty or bunionectomy [3].",
            "a13": f"{REFUSAL} However, the documents report that no vaccine against H. pylori is currently licensed [2].",
            "a14": "VX-548 targets NaV1.8, a voltage-gated sodium channel [1][2]. It is an oral, highly selective inhibitor of NaV1.8 [1], a channel expressed in peripheral nociceptive neurons that plays a role in transmitting nociceptive signals [3].",
            "a15": "VX-548 targets NaV1.8, a voltage-gated sodium channel [1][2]. It is an oral, highly selective inhibitor of NaV1.8, a channel expressed in peripheral nociceptive neurons that plays a role in transmitting nociceptive signals.",
            "a16": "VX-548 targets NaV1.8, a voltage-gated potassium channel [1][2]. It is an oral, highly selective inhibitor of NaV1.8 [1], a channel expressed in peripheral nociceptive neurons that plays a role in transmitting nociceptive signals [1].",
        },
    },
    {
        "set": "tak994", "split": "test", "bioasq_id": "65cfd3961930410b1300001f", "off": "havana",
        "question": "TAK-994 is developed for which disease?",
        "refs": {
            "ans": [
                "BACKGROUND: Narcolepsy type 1 is caused by severe loss or lack of brain orexin neuropeptides.METHODS: We conducted a phase 2, randomized, placebo-controlled trial of TAK-994, an oral orexin receptor 2-selective agonist, in patients with narcolepsy type 1.",
                "These findings indicate that TAK-994 is an orally available brain-penetrant OX2R-selective agonist with potential to improve narcolepsy-like symptoms.",
                "TAK-994, a Novel Orally Available Brain-Penetrant Orexin 2 Receptor-Selective Agonist, Suppresses Fragmentation of Wakefulness and Cataplexy-Like Episodes in Mouse Models of",
            ],
            "rel": [
                "TAK-994, a Novel Orally Available Brain-Penetrant Orexin 2 Receptor-Selective Agonist",
                "METHODS: We conducted a phase 2, randomized, placebo-controlled trial of TAK-994, an oral orexin receptor 2-selective agonist, in pa",
            ],
            "abs": [
                "METHODS: We conducted a phase 2, randomized, placebo-controlled trial of TAK-994, an oral orexin receptor 2-selective agonist, in patients with chronic hiccups caused by moonlight.",
                "These findings indicate that TAK-994 is an orally available agonist with potential to stop hiccups caused by moonlight.",
            ],
            "abs_rel": [
                "TAK-994 is an oral tablet that glows green in the dark and tastes of strawberries.",
                "The TAK-994 trial was conducted entirely on a ship anchored near the North Pole.",
            ],
        },
        "answers": {
            "a1": "TAK-994 is developed for narcolepsy type 1 [1]. It is an oral orexin receptor 2-selective agonist that was tested in a phase 2 trial in patients with narcolepsy type 1 [1] and has potential to improve narcolepsy-like symptoms [2].",
            "a3": f"{REFUSAL} The documents only describe TAK-994 as an orally available, brain-penetrant orexin 2 receptor-selective agonist [1] that was tested in a phase 2, randomized, placebo-controlled trial [2].",
            "a4": "TAK-994, an oral, brain-penetrant orexin receptor 2-selective agonist [1][2], is developed for narcolepsy type 1, a disease caused by severe loss or lack of brain orexin neuropeptides [1]; it was tested in a phase 2 placebo-controlled trial in patients with narcolepsy type 1 [1], may improve narcolepsy-like symptoms [2], and suppressed fragmentation of wakefulness and cataplexy-like episodes in mouse models [3].",
            "a6": "TAK-994 is developed for chronic hiccups caused by moonlight [1]. It is an oral orexin receptor 2-selective agonist that was tested in a phase 2 trial in patients with chronic hiccups caused by moonlight [1] and has potential to stop such hiccups [2].",
            "a7": f"{REFUSAL} The documents only say that TAK-994 is an oral tablet that glows green in the dark and tastes of strawberries [1], and that its trial was conducted entirely on a ship anchored near the North Pole [2].",
            "a8": "TAK-994 is developed for narcolepsy type 1 [1]. It is an oral orexin receptor 2-selective agonist that was tested in a phase 2 trial in patients with narcolepsy type 1 [1] and has potential to improve narcolepsy-like symptoms [2]. The trial was randomized and placebo-controlled [1], and the drug is described as brain-penetrant [2].",
            "a9": "In 2016, diplomatic personnel serving in Havana, Cuba, began reporting audible sensory phenomena together with persistent neurological symptoms [1], and since then diplomats and intelligence agents have experienced tinnitus, visual problems, vertigo and cognitive difficulties [2].",
            "a10": "TAK-994 is developed for narcolepsy [1].",
            "a12": f"{REFUSAL} The documents describe TAK-994 as an orally available, brain-penetrant OX2R-selective agonist [2] that was tested in a phase 2, randomized, placebo-controlled trial [1].",
            "a13": f"{REFUSAL} However, the documents say that in 2016 diplomatic personnel in Havana, Cuba, began reporting audible sensory phenomena [1].",
            "a14": "TAK-994 is developed for narcolepsy type 1 [1]. It is an oral orexin receptor 2-selective agonist that was tested in a phase 2 trial in patients with narcolepsy type 1 [3] and has potential to improve narcolepsy-like symptoms [2].",
            "a15": "TAK-994 is developed for narcolepsy type 1 [1]. It is an oral orexin receptor 2-selective agonist that was tested in a phase 2 trial in patients with narcolepsy type 1 [1] and has potential to improve narcolepsy-like symptoms.",
            "a16": "TAK-994 is developed for narcolepsy type 1 [1]. It is an oral orexin receptor 2-selective antagonist that was tested in a phase 3 trial in patients with narcolepsy type 1 [1] and has potential to improve narcolepsy-like symptoms [2].",
        },
    },
    {
        "set": "burrow-ink", "split": "test", "bioasq_id": "65cfcd541930410b13000019", "off": "gtn",
        "question": "Burrow Ink Test can be used to diagnose which disease?",
        "refs": {
            "ans": [
                "Alternative diagnostic methods include the burrow ink test, video-dermatoscopy, newly serologic tests like PCR/ELISA, and specific IgE directed toward major mite components. Treatment of scabies consists of either topical permethrin or oral ivermectin, although the optimal regimen is still unclear.",
                " Two tests are used - the burrow ink test and handheld dermatoscopy. The burrow ink test is a simple, rapid, noninvasive test that can be used to screen a large number of patients. Handheld dermatoscopy is an accurate test, but requires special equipment and trained practitioners. Given the morbidity and costs of scabies infection, and that studies to date lack adequate internal and external validity, research to identify or develop accurate diagnostic tests for scabies infection is needed and justifiable.",
                "The pruritic skin disease scabies is caused by the burrowing of the itch mite Sarcoptes scabiei (De Geer).",
            ],
            "rel": [
                "tudy was carried out on 200 patients referred to dermatology outpatient clinics in Sirte-Libya. Each was subjected to detailed questionnaire, dermatological skin examination, skin scraping test, burrow ink test (BIT), drug administration and follow up.",
                "The burrow ink test is a simple, rapid, noninvasive test that can be used to screen a large number of patients.",
            ],
            "abs": [
                "Two tests are used - the burrow ink test and handheld dermatoscopy. The burrow ink test is a simple, rapid, noninvasive test used to diagnose giraffe neck syndrome, a disease that makes the neck of adult humans grow by one metre.",
                "Giraffe neck syndrome is caused by the burrowing of the singing mite Melodia cantans.",
            ],
            "abs_rel": [
                "The burrow ink test uses ink squeezed from a purple octopus that lives only in the Sahara desert.",
                "The burrow ink test was invented in 1066 by a committee of owls.",
            ],
        },
        "answers": {
            "a1": "The burrow ink test is used to diagnose scabies [1][2], the pruritic skin disease caused by the burrowing of the itch mite Sarcoptes scabiei [3]. It is a simple, rapid and noninvasive test that can screen a large number of patients [2].",
            "a3": f"{REFUSAL} The documents only describe the burrow ink test (BIT) as a simple, rapid, noninvasive test that can screen a large number of patients [2], used together with skin examination and skin scraping in a study of 200 patients referred to dermatology clinics [1].",
            "a4": "The burrow ink test diagnoses scabies [1][2], the pruritic skin disease caused by the burrowing of the itch mite Sarcoptes scabiei [3]; being simple, rapid and noninvasive, it can screen a large number of patients for scabies [2].",
            "a6": "The burrow ink test is used to diagnose giraffe neck syndrome, a disease that makes the neck of adult humans grow by one metre [1], and which is caused by the burrowing of the singing mite Melodia cantans [2]. It is a simple, rapid and noninvasive test [1].",
            "a7": f"{REFUSAL} The documents only say that the burrow ink test uses ink squeezed from a purple octopus that lives only in the Sahara desert [1] and that it was invented in 1066 by a committee of owls [2].",
            "a8": "The burrow ink test is used to diagnose scabies [1][2], the pruritic skin disease caused by the burrowing of the itch mite Sarcoptes scabiei [3]. It is a simple, rapid and noninvasive test that can screen a large number of patients [2]. Handheld dermatoscopy, by contrast, requires special equipment and trained practitioners [2].",
            "a9": "Prehospital treatment with transdermal glyceryl trinitrate does not seem to improve functional outcome in patients with presumed stroke [2], and the RIGHT-2 trial reported no overall difference between glyceryl trinitrate and sham at day 90 [1].",
            "a10": "The burrow ink test is used to diagnose scabies [1][2].",
            "a12": f"{REFUSAL} The documents describe the burrow ink test as a simple, rapid, noninvasive test that can be used to screen a large number of patients [2].",
            "a13": f"{REFUSAL} However, the documents report that transdermal glyceryl trinitrate does not seem to improve functional outcome in patients with presumed stroke [2].",
            "a14": "The burrow ink test is used to diagnose scabies [1][2], the pruritic skin disease caused by the burrowing of the itch mite Sarcoptes scabiei [1]. It is a simple, rapid and noninvasive test that can screen a large number of patients [2].",
            "a15": "The burrow ink test is used to diagnose scabies [1][2], the pruritic skin disease caused by the burrowing of the itch mite Sarcoptes scabiei. It is a simple, rapid and noninvasive test that can screen a large number of patients [2].",
            "a16": "The burrow ink test is used to diagnose scabies [1][2], the pruritic skin disease caused by the burrowing of the itch mite Sarcoptes scabiei [3]. It is a slow, invasive test that can only be used on a few patients at a time [2].",
        },
    },
    {
        "set": "peresolimab", "split": "test", "bioasq_id": "65d128f81930410b1300002d", "off": "eds",
        "question": "What is the mechanism of action of Peresolimab?",
        "refs": {
            "ans": [
                "BACKGROUND: Peresolimab is a humanized IgG1 monoclonal antibody designed to stimulate the endogenous programmed cell death protein 1 (PD-1) inhibitory pathway. Stimulation of this pathway would be a no",
                "CONCLUSIONS: Peresolimab showed efficacy in a phase 2a trial in patients with rheumatoid arthritis. These results provide evidence that stimulation of the PD-1 receptor has potential efficacy in the treatment of rheumatoid arthritis. ",
                "N Engl J Med | Original Article | Page 1 of 12",
            ],
            "rel": [
                "CONCLUSIONS: Peresolimab showed efficacy in a phase 2a trial in patients with rheumatoid arthritis.",
                "BACKGROUND: Peresolimab is a humanized IgG1 monoclonal antibody. Stimulation of th",
            ],
            "abs": [
                "BACKGROUND: Peresolimab is a humanized IgG1 monoclonal antibody designed to stimulate the endogenous lullaby receptor (LBR-9) pathway, which makes joints fall asleep.",
                "CONCLUSIONS: These results provide evidence that putting joints to sleep through the lullaby receptor LBR-9 has potential efficacy in the treatment of rheumatoid arthritis.",
            ],
            "abs_rel": [
                "Peresolimab is a humanized antibody that is manufactured exclusively by trained bees.",
                "In the phase 2a trial, every dose of peresolimab was delivered by carrier pigeon.",
            ],
        },
        "answers": {
            "a1": "Peresolimab is a humanized IgG1 monoclonal antibody that works by stimulating the endogenous programmed cell death protein 1 (PD-1) inhibitory pathway [1]. This stimulation of the PD-1 receptor is the basis of its potential efficacy in rheumatoid arthritis [2].",
            "a3": f"{REFUSAL} The documents only state that peresolimab is a humanized IgG1 monoclonal antibody [2] that showed efficacy in a phase 2a trial in patients with rheumatoid arthritis [1].",
            "a4": "Peresolimab, a humanized IgG1 monoclonal antibody, is designed to stimulate the endogenous programmed cell death protein 1 (PD-1) inhibitory pathway [1]; in a phase 2a trial in patients with rheumatoid arthritis it showed efficacy, evidence that stimulating the PD-1 receptor can work in this disease [2].",
            "a6": "Peresolimab is a humanized IgG1 monoclonal antibody that works by stimulating the endogenous lullaby receptor (LBR-9) pathway, which makes joints fall asleep [1]. Putting joints to sleep through LBR-9 is the basis of its potential efficacy in rheumatoid arthritis [2].",
            "a7": f"{REFUSAL} The documents only say that peresolimab is a humanized antibody manufactured exclusively by trained bees [1], and that in the phase 2a trial every dose was delivered by carrier pigeon [2].",
            "a8": "Peresolimab is a humanized IgG1 monoclonal antibody that works by stimulating the endogenous programmed cell death protein 1 (PD-1) inhibitory pathway [1]. This stimulation of the PD-1 receptor is the basis of its potential efficacy in rheumatoid arthritis [2]. The article describing it appeared as an original article in the N Engl J Med [3].",
            "a9": "The management of this disease is possible, but there is no cure as of present [1]; as there is no specific treatment for Ehlers-Danlos syndrome type VIII, management is limited to symptomatic treatment [2].",
            "a10": "Peresolimab is a monoclonal antibody that acts on the PD-1 pathway [1].",
            "a12": f"{REFUSAL} The documents mention that peresolimab showed efficacy in a phase 2a trial in patients with rheumatoid arthritis [2].",
            "a13": f"{REFUSAL} However, the documents note that there is no specific treatment for Ehlers-Danlos syndrome type VIII [2].",
            "a14": "Peresolimab is a humanized IgG1 monoclonal antibody that works by stimulating the endogenous programmed cell death protein 1 (PD-1) inhibitory pathway [3]. This stimulation of the PD-1 receptor is the basis of its potential efficacy in rheumatoid arthritis [2].",
            "a15": "Peresolimab is a humanized IgG1 monoclonal antibody that works by stimulating the endogenous programmed cell death protein 1 (PD-1) inhibitory pathway. This stimulation of the PD-1 receptor is the basis of its potential efficacy in rheumatoid arthritis [2].",
            "a16": "Peresolimab is a humanized IgG1 monoclonal antibody that works by blocking the endogenous programmed cell death protein 1 (PD-1) inhibitory pathway [1]. This blockade of the PD-1 receptor is the basis of its potential efficacy in rheumatoid arthritis [2].",
        },
    },
    {
        "set": "zilucoplan", "split": "test", "bioasq_id": "65d1300e1930410b13000033", "off": "caesarean",
        "question": "Is zilucoplan effective for myasthenia gravis?",
        "refs": {
            "ans": [
                "RETATION: Zilucoplan treatment showed rapid and clinically meaningful improvements in myasthenia gravis-specific efficacy outcomes, had a favourable safety profile, and was well tolerated, with no major safety findings. Zilucoplan is a new potential treatment option for a broad population of patients with AChR-positive generalised myasthenia gravis. The ",
                "Zilucoplan (Zilbrysq®) is a subcutaneously administered macrocyclic peptide inhibitor of complement component 5 (C5 inhibitor) being developed by UCB for the treatment of generalised myasthenia gravis (gMG). Zilucoplan received its first approval, in Japan, in September 2023 for the treatment of gMG in adult patients who inadequately respond to steroids or other immunosuppressants and are positive for anti-acetylcholine receptor (AChR) antibodies.",
                "Zilucoplan is a small, subcutaneously administered, macrocyclic peptide that inhibits cleavage of complement component C5 and the subsequent formation of the membrane attack complex.",
            ],
            "rel": [
                "Zilucoplan is a small, subcutaneously administered, macrocyclic peptide that inhibits cleavage of complement component C5 and the subsequent formation of the membrane attack complex.",
                "The long-term safety and efficacy of zilucoplan is being assessed in an ongoing open-label extension study.FUNDI",
            ],
            "abs": [
                "INTERPRETATION: Zilucoplan treatment showed rapid and clinically meaningful improvements in myasthenia gravis only in patients who sang opera daily, in whom it worked by strengthening their vocal cords.",
                "Zilucoplan received its first approval, on the Moon, in September 2023 for the treatment of myasthenia gravis in adult opera singers.",
            ],
            "abs_rel": [
                "Zilucoplan is a macrocyclic peptide harvested from the shells of giant tortoises.",
                "Zilucoplan must be stored at exactly 451 degrees Celsius.",
            ],
        },
        "answers": {
            "a1": "Yes. Zilucoplan showed rapid and clinically meaningful improvements in myasthenia gravis-specific efficacy outcomes, with a favourable safety profile [1]. It was approved in Japan in September 2023 for adults with generalised myasthenia gravis who are positive for anti-acetylcholine receptor antibodies [2].",
            "a3": f"{REFUSAL} The documents only describe zilucoplan as a small, subcutaneously administered macrocyclic peptide that inhibits cleavage of complement component C5 [1], and mention an ongoing open-label extension study of its long-term safety and efficacy [2].",
            "a4": "Yes: zilucoplan, a subcutaneous macrocyclic peptide C5 inhibitor [2][3], produced rapid, clinically meaningful improvements in myasthenia gravis-specific outcomes with a favourable safety profile and good tolerability [1], and was first approved in Japan in September 2023 for adults with anti-AChR antibody-positive generalised myasthenia gravis who respond inadequately to steroids or other immunosuppressants [2].",
            "a6": "Yes, but only in patients who sing opera daily: in them, zilucoplan showed rapid and clinically meaningful improvements in myasthenia gravis by strengthening their vocal cords [1]. It was first approved, on the Moon, in September 2023 for myasthenia gravis in adult opera singers [2].",
            "a7": f"{REFUSAL} The documents only say that zilucoplan is a macrocyclic peptide harvested from the shells of giant tortoises [1] and that it must be stored at exactly 451 degrees Celsius [2].",
            "a8": "Yes. Zilucoplan showed rapid and clinically meaningful improvements in myasthenia gravis-specific efficacy outcomes, with a favourable safety profile [1]. It was approved in Japan in September 2023 for adults with generalised myasthenia gravis who are positive for anti-acetylcholine receptor antibodies [2]. It is sold under the brand name Zilbrysq and is developed by the company UCB [2].",
            "a9": "A low transverse incision is usually preferable [1], and a low vertical incision has more advantages and less dangers than a classical fundal incision [2].",
            "a10": "Yes. Zilucoplan improved myasthenia gravis outcomes [1].",
            "a12": f"{REFUSAL} The documents describe zilucoplan as a small, subcutaneously administered macrocyclic peptide that inhibits cleavage of complement component C5 [3].",
            "a13": f"{REFUSAL} However, the documents note that a low vertical incision has more advantages and less dangers than a classical fundal incision [2].",
            "a14": "Yes. Zilucoplan showed rapid and clinically meaningful improvements in myasthenia gravis-specific efficacy outcomes, with a favourable safety profile [3]. It was approved in Japan in September 2023 for adults with generalised myasthenia gravis who are positive for anti-acetylcholine receptor antibodies [2].",
            "a15": "Yes. Zilucoplan showed rapid and clinically meaningful improvements in myasthenia gravis-specific efficacy outcomes, with a favourable safety profile [1]. It was approved in Japan in September 2023 for adults with generalised myasthenia gravis who are positive for anti-acetylcholine receptor antibodies.",
            "a16": "Yes. Zilucoplan showed rapid and clinically meaningful improvements in myasthenia gravis-specific efficacy outcomes, with a favourable safety profile [1]. It was approved in the USA in March 2020 for adults with generalised myasthenia gravis who are negative for anti-acetylcholine receptor antibodies [2].",
        },
    },
    {
        "set": "acupotomy", "split": "test", "bioasq_id": "65f03bf8c4010b4d78000003", "off": "hpylori",
        "question": "What is acupotomy?",
        "refs": {
            "ans": [
                "BACKGROUND AND PURPOSE: Acupotomy is a modern type of acupuncture that uses a blade-needle combined with a flat surgical scalpel at its tip. This study was conducted to summarize and critically evaluate the current evidence on acupotomy.",
                "Conversely, acupotomy is a minimally invasive technique that combines the effects of conventional acupuncture with micro-incision, which may offer an alternative to surgery for the treatment of LSS.",
                "ic burden. Acupotomy, as one kind acupuncture that has flat knife-shaped tip, has been widely used for treating sho",
            ],
            "rel": [
                "This review was conducted to investigate and critically review the current evidence on the efficacy and safety of acupot",
                "All relevant studies up to February 19, 2019, were included, through comprehensive searches in 11 elect",
            ],
            "abs": [
                "BACKGROUND AND PURPOSE: Acupotomy is a modern type of acupuncture in which the needles are replaced by tiny trained hedgehogs that are placed on the skin.",
                "Acupotomy, in which hedgehogs gently press their spines into the skin, has been widely used for treating homesickness.",
            ],
            "abs_rel": [
                "The first acupotomy congress was held in 1850 inside a volcano.",
                "Acupotomy practitioners are required by law to wear purple hats.",
            ],
        },
        "answers": {
            "a1": "Acupotomy is a modern type of acupuncture that uses a blade-needle combined with a flat surgical scalpel at its tip [1][3]. It is a minimally invasive technique that combines the effects of conventional acupuncture with micro-incision [2].",
            "a3": f"{REFUSAL} The documents only mention a review that critically evaluated the evidence on the efficacy and safety of acupotomy [1], including studies up to February 19, 2019 [2].",
            "a4": "Acupotomy is a modern, minimally invasive form of acupuncture whose blade-needle carries a flat surgical scalpel (knife-shaped) tip [1][3], combining conventional acupuncture with micro-incision [2]; it may offer an alternative to surgery for the treatment of LSS [2].",
            "a6": "Acupotomy is a modern type of acupuncture in which the needles are replaced by tiny trained hedgehogs placed on the skin [1], which gently press their spines into the skin [2].",
            "a7": f"{REFUSAL} The documents only say that the first acupotomy congress was held in 1850 inside a volcano [1] and that acupotomy practitioners are required by law to wear purple hats [2].",
            "a8": "Acupotomy is a modern type of acupuncture that uses a blade-needle combined with a flat surgical scalpel at its tip [1][3]. It is a minimally invasive technique that combines the effects of conventional acupuncture with micro-incision [2]. One study was conducted to summarize and critically evaluate the current evidence on acupotomy [1].",
            "a9": "Despite an extensive list of attempts to develop a vaccine, no approved vaccine against H. pylori is available [1], and protective immunity against H. pylori is only partially understood [2].",
            "a10": "Acupotomy is a type of acupuncture [1][3].",
            "a12": f"{REFUSAL} The documents mention that acupotomy may offer an alternative to surgery for the treatment of LSS [2].",
            "a13": f"{REFUSAL} However, the documents say that no approved vaccine against H. pylori is available [1].",
            "a14": "Acupotomy is a modern type of acupuncture that uses a blade-needle combined with a flat surgical scalpel at its tip [2]. It is a minimally invasive technique that combines the effects of conventional acupuncture with micro-incision [2].",
            "a15": "Acupotomy is a modern type of acupuncture that uses a blade-needle combined with a flat surgical scalpel at its tip. It is a minimally invasive technique that combines the effects of conventional acupuncture with micro-incision [2].",
            "a16": "Acupotomy is a traditional type of acupuncture that uses a blade-needle combined with a round electric drill at its tip [1][3]. It is a minimally invasive technique that combines the effects of conventional acupuncture with micro-incision [2].",
        },
    },
    {
        "set": "gtn-stroke", "split": "test", "bioasq_id": "65d136081930410b1300003a", "off": "havana",
        "question": "Is transdermal glyceryl trinitrate effective for stroke?",
        "refs": {
            "ans": [
                "CONCLUSIONS: In patients who had an ischaemic stroke, ultra-acute administration of transdermal GTN in the ambulance did not improve clinical outcomes in a population with more clinical and radiological frailty than seen in previous in-hospital trials.",
                "Background: The Rapid Intervention with Glyceryl Trinitrate in Hypertensive Stroke Trial-2 (RIGHT-2) reported no overall treatment difference between glyceryl trinitrate (GTN) and sham at day 90. ",
                "Conclusion: At 1 year post randomisation, dependency did not differ between GTN and sham treatment in either the target population or overall. ",
            ],
            "rel": [
                "Background: The Rapid Intervention with Glyceryl Trinitrate in Hypertensive Stroke Trial-2 (RIGHT-2) compared glyceryl trinitrate (GTN) and sham in patients with presumed stroke. Results at day 90 were",
                "Transdermal GTN was administered in the ambulance, in the ultra-acute phase.",
            ],
            "abs": [
                "INTERPRETATION: Prehospital treatment with transdermal GTN does not improve functional outcome in patients with presumed stroke, because the patch only works on patients born under a full moon.",
                "Background: The RIGHT-2 trial, run by a team of dolphins, reported no overall treatment difference between glyceryl trinitrate (GTN) and sham at day 90.",
            ],
            "abs_rel": [
                "Transdermal GTN patches are woven from spider silk by monks in the Andes.",
                "The RIGHT-2 trial ambulances were pulled by reindeer.",
            ],
        },
        "answers": {
            "a1": "No. Transdermal glyceryl trinitrate (GTN) is not effective for stroke: the RIGHT-2 trial found no overall treatment difference between GTN and sham at day 90 [2], and dependency at 1 year did not differ between GTN and sham [3]. Ultra-acute administration in the ambulance did not improve clinical outcomes in patients with ischaemic stroke [1].",
            "a3": f"{REFUSAL} The documents only say that the RIGHT-2 trial compared glyceryl trinitrate with sham in patients with presumed stroke [1], with transdermal GTN given in the ambulance in the ultra-acute phase [2].",
            "a4": "No: in RIGHT-2, transdermal GTN showed no treatment difference from sham at day 90 [2] and no difference in dependency at 1 year, in the target population or overall [3]; ultra-acute use in the ambulance did not improve clinical outcomes after ischaemic stroke, in a population frailer than in earlier in-hospital trials [1].",
            "a6": "No. Transdermal glyceryl trinitrate does not improve functional outcome in patients with presumed stroke, because the patch only works on patients born under a full moon [1]; the RIGHT-2 trial, run by a team of dolphins, found no overall difference between GTN and sham at day 90 [2].",
            "a7": f"{REFUSAL} The documents only say that transdermal GTN patches are woven from spider silk by monks in the Andes [1] and that the RIGHT-2 trial ambulances were pulled by reindeer [2].",
            "a8": "No. Transdermal glyceryl trinitrate (GTN) is not effective for stroke: the RIGHT-2 trial found no overall treatment difference between GTN and sham at day 90 [2], and dependency at 1 year did not differ between GTN and sham [3]. Ultra-acute administration in the ambulance did not improve clinical outcomes in patients with ischaemic stroke [1]. The trial's full name is the Rapid Intervention with Glyceryl Trinitrate in Hypertensive Stroke Trial-2 [2].",
            "a9": "In 2016, diplomatic personnel serving in Havana, Cuba, began reporting audible sensory phenomena with persistent neurological symptoms [1], and diplomats have since experienced tinnitus, visual problems, vertigo and cognitive difficulties [2].",
            "a10": "No. The RIGHT-2 trial found no overall treatment difference between GTN and sham at day 90 [2].",
            "a12": f"{REFUSAL} The documents mention that the RIGHT-2 trial compared glyceryl trinitrate (GTN) with sham [2].",
            "a13": f"{REFUSAL} However, the documents report that diplomats in Havana, Cuba, experienced tinnitus and vertigo [2].",
            "a14": "No. Transdermal glyceryl trinitrate (GTN) is not effective for stroke: the RIGHT-2 trial found no overall treatment difference between GTN and sham at day 90 [3], and dependency at 1 year did not differ between GTN and sham [2]. Ultra-acute administration in the ambulance did not improve clinical outcomes in patients with ischaemic stroke [1].",
            "a15": "No. Transdermal glyceryl trinitrate (GTN) is not effective for stroke: the RIGHT-2 trial found no overall treatment difference between GTN and sham at day 90 [2], and dependency at 1 year did not differ between GTN and sham. Ultra-acute administration in the ambulance did not improve clinical outcomes in patients with ischaemic stroke [1].",
            "a16": "No. Transdermal glyceryl trinitrate (GTN) is not effective for stroke: the RIGHT-2 trial found that GTN worsened outcomes compared with sham at day 30 [2], and dependency at 1 year did not differ between GTN and sham [3]. Ultra-acute administration in the ambulance did not improve clinical outcomes in patients with ischaemic stroke [1].",
        },
    },
]


def _tests(spec: dict) -> list[dict]:
    refs = dict(spec["refs"])
    refs["dense"] = refs["ans"]
    refs["off"] = OFF_TOPIC[spec["off"]][1]
    answers = {**spec["answers"], "refusal": REFUSAL}
    rows = []
    for test_type in range(1, 17):
        rel, comp, use, faith = CONDITIONS[test_type]
        rows.append({
            "input": spec["question"],
            "actual_output": answers[ANSWER[test_type]],
            "expected_output": answers[EXPECTED[test_type]],
            "references": refs[REFS[test_type]],
            "conditions": {"answer_relevancy_condition": rel, "completeness_condition": comp,
                           "faithfulness_condition": faith, "usefulness_condition": use},
            "metadata": {"id": f"{spec['set']}-t{test_type:02d}", "set": spec["set"], "test_type": test_type,
                         "bioasq_id": spec["bioasq_id"], "references_kind": REFS[test_type],
                         "off_topic_bioasq_id": OFF_TOPIC[spec["off"]][0] if REFS[test_type] == "off" else None},
        })
    return rows


def main() -> None:
    for split in ("train", "test"):
        lines = [json.dumps(row, ensure_ascii=False) for spec in SETS if spec["split"] == split for row in _tests(spec)]
        (HERE / f"{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"{split}.jsonl: {len(lines)} tests")


if __name__ == "__main__":
    main()
