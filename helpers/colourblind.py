"""Colour-vision-deficiency checks for the figures' palette, in numpy: a colour as a dichromat sees it (Machado,
Oliveira and Fernandes 2009, severity 1, applied to linear RGB) and the CIEDE2000 colour difference in CIE Lab
(D65 white). `tests/test_plots.py` uses them to keep the methods' colours apart under deuteranopia and
protanopia."""

from __future__ import annotations

import numpy as np

# Machado et al. (2009), Table of simulation matrices, severity 1.0, on linear RGB.
MACHADO = {
    "protanopia": np.array(
        [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]
    ),
    "deuteranopia": np.array(
        [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]]
    ),
}
# linear sRGB -> XYZ (D65), and the D65 white point
_RGB_TO_XYZ = np.array(
    [[0.4124564, 0.3575761, 0.1804375], [0.2126729, 0.7151522, 0.0721750], [0.0193339, 0.1191920, 0.9503041]]
)
_WHITE = _RGB_TO_XYZ @ np.ones(3)


def srgb(hex_colour: str) -> np.ndarray:
    """`#rrggbb` as sRGB values in [0, 1]."""
    h = hex_colour.lstrip("#")
    return np.array([int(h[i : i + 2], 16) / 255 for i in (0, 2, 4)])


def to_linear(rgb: np.ndarray) -> np.ndarray:
    """sRGB (gamma-encoded, [0, 1]) to linear RGB."""
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def simulate(hex_colour: str, deficiency: str) -> np.ndarray:
    """The linear RGB a dichromat with `deficiency` ("protanopia", "deuteranopia") sees for `hex_colour`, or the
    colour itself for "normal" (Machado et al. 2009, severity 1, clipped to [0, 1])."""
    lin = to_linear(srgb(hex_colour))
    if deficiency == "normal":
        return lin
    return np.clip(MACHADO[deficiency] @ lin, 0.0, 1.0)


def lab(linear_rgb: np.ndarray) -> np.ndarray:
    """Linear RGB to CIE L*a*b* (D65)."""
    xyz = _RGB_TO_XYZ @ linear_rgb / _WHITE
    eps, kappa = 216 / 24389, 24389 / 27
    f = np.where(xyz > eps, np.cbrt(xyz), (kappa * xyz + 16) / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e2000(lab1: np.ndarray, lab2: np.ndarray) -> float:
    """The CIEDE2000 colour difference of two CIE Lab colours (Sharma, Wu and Dalal 2005; kL = kC = kH = 1)."""
    L1, a1, b1 = lab1
    L2, a2, b2 = lab2
    c_bar = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2
    g = 0.5 * (1 - np.sqrt(c_bar**7 / (c_bar**7 + 25.0**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p = np.degrees(np.arctan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = np.degrees(np.arctan2(b2, a2p)) % 360 if c2p else 0.0
    dL, dC = L2 - L1, c2p - c1p
    dh = 0.0
    if c1p * c2p:
        dh = h2p - h1p
        dh = dh - 360 if dh > 180 else dh + 360 if dh < -180 else dh
    dH = 2 * np.sqrt(c1p * c2p) * np.sin(np.radians(dh / 2))
    L_bar, c_bar_p = (L1 + L2) / 2, (c1p + c2p) / 2
    h_bar = h1p + h2p
    if c1p * c2p:
        if abs(h1p - h2p) <= 180:
            h_bar /= 2
        else:
            h_bar = (h_bar + 360) / 2 if h_bar < 360 else (h_bar - 360) / 2
    t = (
        1
        - 0.17 * np.cos(np.radians(h_bar - 30))
        + 0.24 * np.cos(np.radians(2 * h_bar))
        + 0.32 * np.cos(np.radians(3 * h_bar + 6))
        - 0.20 * np.cos(np.radians(4 * h_bar - 63))
    )
    d_theta = 30 * np.exp(-(((h_bar - 275) / 25) ** 2))
    r_c = 2 * np.sqrt(c_bar_p**7 / (c_bar_p**7 + 25.0**7))
    s_l = 1 + 0.015 * (L_bar - 50) ** 2 / np.sqrt(20 + (L_bar - 50) ** 2)
    s_c, s_h = 1 + 0.045 * c_bar_p, 1 + 0.015 * c_bar_p * t
    r_t = -np.sin(np.radians(2 * d_theta)) * r_c
    return float(np.sqrt((dL / s_l) ** 2 + (dC / s_c) ** 2 + (dH / s_h) ** 2 + r_t * (dC / s_c) * (dH / s_h)))


def delta_e(colour1: str, colour2: str, deficiency: str = "normal") -> float:
    """CIEDE2000 between two `#rrggbb` colours as seen with `deficiency` ("normal", "protanopia",
    "deuteranopia")."""
    return delta_e2000(lab(simulate(colour1, deficiency)), lab(simulate(colour2, deficiency)))
