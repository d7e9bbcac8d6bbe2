/**
 * The Tailwind (v3) preset with BCMS's theme names (`darkMode`, `theme.extend` and the rest), for a
 * plugin UI's own config: `presets: [require('bcms-extensions/ui/tailwind.config.cjs')]`. One value,
 * not named exports: take it whole.
 */
declare const preset: Readonly<Record<string, unknown>>;
export = preset;
