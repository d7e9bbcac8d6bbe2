// Types for `import 'bcms-extensions/ui/styles.css'`: a stylesheet, nothing to import from it.
export {};
