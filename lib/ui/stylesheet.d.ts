// Types for `import 'bcms-extensions/ui/base.css'`: a stylesheet, nothing to import from it.
export {};
