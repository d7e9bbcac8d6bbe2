// A Tailwind (v3) preset with the theme names BCMS plugin UIs use (colours such as grey, darkGrey,
// green; the `desktop` breakpoint; radius 3.5), in place of @becomes/cms-ui's config. A plugin's
// tailwind.config.cjs requires it and sets `content` (BCMS's also set `purge.content`: kept).
module.exports = {
  darkMode: 'class',
  content: [],
  purge: { content: [] },
  theme: {
    extend: {
      colors: {
        white: '#ffffff',
        light: '#f4f6fa',
        grey: '#c6ccd6',
        darkGrey: '#1d2330',
        dark: '#0f131b',
        green: '#1e7d43',
        red: '#b00020',
        yellow: '#a35a00',
        pink: '#d6336c',
        primary: '#3357d6',
      },
      screens: { desktop: '900px', xs: '480px' },
      borderRadius: { 2.5: '0.625rem', 3.5: '0.875rem' },
      spacing: { 4.5: '1.125rem', 7.5: '1.875rem' },
    },
  },
  plugins: [],
};
