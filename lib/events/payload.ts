import { type EntryRow, type TemplateRow, toEntry, toTemplate } from '../db/repository';

/**
 * What a handler gets as `payload`: for a write, the document in BCMS's shape (as the repository
 * gives it), from the row the trigger recorded with `to_jsonb` (its times as text); for a custom
 * emit, what was emitted.
 */
export function eventPayload(scope: string, doc: string | null, recorded: unknown): unknown {
  // A custom emit has no document, whatever its scope.
  if (doc === null || recorded === null || typeof recorded !== 'object' || (scope !== 'ENTRY' && scope !== 'TEMPLATE')) return recorded;
  const row = recorded as Record<string, unknown>;
  const withDates = { ...row, created_at: new Date(String(row.created_at)), updated_at: new Date(String(row.updated_at)) };
  return scope === 'ENTRY' ? toEntry(withDates as unknown as EntryRow) : toTemplate(withDates as unknown as TemplateRow);
}
